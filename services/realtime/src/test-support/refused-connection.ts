import { WebSocket } from 'ws';
import type { Frame } from './ws-test-client';

/** Opens a WebSocket the server is expected to close after the upgrade: every frame it got, and its close. */
export function refusedConnection(url: string, bearer: string): Promise<{ frames: Frame[]; close: { code: number; reason: string } }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${bearer}` } });
    const frames: Frame[] = [];
    ws.on('message', (d) => frames.push(JSON.parse(d.toString()) as Frame));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once('error', reject);
    ws.once('close', (code, reason) => resolve({ frames, close: { code, reason: reason.toString() } }));
  });
}
