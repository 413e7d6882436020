import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';

// Arbitrary frames to a live connection: every text or binary frame gets
// exactly one answer (an error frame with a contract code, or a valid reply),
// never `internal`, and the connection stays open. Seeded; fast-check prints
// the seed and the shrunk frame on failure.
const config = { seed: 0x6a7e_0004, numRuns: 300 };
const CLIENT_CODES = ['invalid_frame', 'invalid_topic', 'forbidden_topic', 'forbidden_channel', 'payload_too_large', 'invalid_or_missing_token', 'identity_mismatch', 'too_many_subscriptions', 'presence_not_enabled'];
const REPLIES = ['subscribed', 'unsubscribed', 'published', 'authenticated', 'error', 'pong', 'presence'];

type Frame = Record<string, unknown> & { type: string };

/** A raw client: one frame out, the next non-`message` frame back. */
class Probe {
  private queue: Frame[] = [];
  private wake: (() => void) | undefined;
  closed: number | undefined;
  constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString()) as Frame;
      if (f.type !== 'message') this.queue.push(f);
      this.wake?.();
    });
    ws.on('close', (code) => {
      this.closed = code;
      this.wake?.();
    });
  }
  static open(url: string, token: string): Promise<Probe> {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    const p = new Probe(ws);
    return new Promise((resolve, reject) => {
      ws.once('error', reject);
      void p.reply(5000).then((f) => (f.type === 'ready' ? resolve(p) : reject(new Error(JSON.stringify(f)))), reject);
    });
  }
  reply(timeoutMs = 5000): Promise<Frame> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        reject(new Error(`no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      const check = () => {
        if (this.queue.length > 0) {
          clearTimeout(timer);
          this.wake = undefined;
          resolve(this.queue.shift()!);
        } else if (this.closed !== undefined) {
          clearTimeout(timer);
          this.wake = undefined;
          reject(new Error(`connection closed with ${this.closed}`));
        }
      };
      this.wake = check;
      check();
    });
  }
  async exchange(data: string | Buffer, binary: boolean): Promise<Frame> {
    this.ws.send(data, { binary });
    return this.reply();
  }
}

describe('WebSocket connection under arbitrary frames', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  let probe: Probe;
  let own: { token: string; tenantId: string };

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
    const issued = issueToken(verifier);
    own = { token: issued.token, tenantId: issued.identity.tenantId };
    probe = await Probe.open(rt.ws, own.token);
  });
  afterAll(async () => {
    probe?.ws.terminate();
    await rt?.stop();
    await verifier.stop();
  });

  it('one contract answer per frame, never internal, never a close', async () => {
    const topic = (ch: string) => topicFor(own.tenantId, ch);
    const topics = fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(topic('a'), topic('b.c:d-e_f'), topic('deep')) },
      {
        weight: 3,
        arbitrary: fc.constantFrom(topic('x'.repeat(129)), topicFor(randomUUID(), 'a'), `tenants/${own.tenantId.toUpperCase()}/channels/a`, `tenants/${own.tenantId}/channels/a/b`, `tenants/${own.tenantId}/channels/%2e`, 'tenants//channels/a'),
      },
      { weight: 1, arbitrary: fc.oneof(fc.string(), fc.integer(), fc.constant(null)) },
    );
    const structured = fc
      .record(
        {
          type: fc.constantFrom('subscribe', 'unsubscribe', 'publish', 'auth', 'publish', 'subscribe', 'ping', 'presence', 7),
          topic: topics,
          after: fc.oneof(fc.constantFrom('0-0', '1-0', '999999999999999-999999999999999', 'bad'), fc.constant(null), fc.string()),
          epoch: fc.oneof(fc.constantFrom('', 'ffffffffffffffffffffffffffffffff', '../x'), fc.string()),
          data: fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.constant('x'.repeat(70_000))),
          token: fc.oneof(fc.constant(own.token), fc.string(), fc.constant('')),
          ref: fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.constant(null), fc.constant({ a: 1 })),
          member: fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constant({ name: 'x'.repeat(300) })),
          idempotency_key: fc.oneof(fc.constantFrom('k-1', 'a'.repeat(129), 'bad key', ''), fc.integer()),
        },
        { requiredKeys: ['type'] },
      )
      .map((o) => ({ text: JSON.stringify(o), binary: false }));
    // Nested 60–5,000 deep as data: serialized by hand, so the test itself does not recurse.
    const deepPublish = fc.integer({ min: 60, max: 5000 }).map((n) => ({ text: `{"type":"publish","topic":"${topic('deep')}","data":${'['.repeat(n)}${']'.repeat(n)},"ref":"deep"}`, binary: false }));
    const frames = fc.oneof(
      { weight: 4, arbitrary: structured },
      { weight: 1, arbitrary: deepPublish },
      { weight: 1, arbitrary: fc.constant({ text: '{"type":"subscribe","topic":' + '['.repeat(5000) + ']'.repeat(5000) + '}', binary: false }) },
      { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 300 }).map((text) => ({ text, binary: false })) },
      { weight: 1, arbitrary: fc.json({ maxDepth: 3 }).map((text) => ({ text, binary: false })) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => ({ text: Buffer.from(b).toString('latin1'), binary: true })) },
    );
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(frames, async ({ text, binary }) => {
        const answer = await probe.exchange(binary ? Buffer.from(text, 'latin1') : text, binary);
        const kind = answer.type === 'error' ? `error:${String(answer.code)}` : answer.type;
        seen.set(kind, (seen.get(kind) ?? 0) + 1);
        expect(REPLIES).toContain(answer.type);
        if (answer.type === 'error') expect(CLIENT_CODES).toContain(answer.code);
        let sent: unknown;
        try {
          sent = binary ? undefined : JSON.parse(text);
        } catch {
          sent = undefined;
        }
        const ref = (sent as { ref?: unknown } | undefined)?.ref;
        if (typeof ref === 'string' || typeof ref === 'number') expect(answer.ref).toBe(ref);
        else expect(answer.ref).toBeUndefined();
        expect(probe.closed).toBeUndefined();
      }),
      config,
    );
    // Not vacuous: the mix reached both valid answers and refusals.
    expect([...seen.keys()].some((k) => k.startsWith('error:'))).toBe(true);
    expect(seen.has('published') || seen.has('subscribed')).toBe(true);
    expect(rt.logs.join('')).not.toContain('frame handling failed');
    if (process.env.FUZZ_STATS) console.log(Object.fromEntries(seen));
  });
});
