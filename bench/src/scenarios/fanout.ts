import { startPeer } from '../lib/peers';
import { failedRow, makeRow, type Row } from '../lib/result-schema';
import { rotate, sleep, withWorkers, type Scenario } from '../lib/scenario';
import type { TenantKey } from '../lib/tokens';
import { watchCpu, type WorkerHandle } from '../lib/workers';
import type { Variant } from '../lib/ws-protocols';

// Like for like (issue #34): batch frames against batch frames, one frame per message against one frame per message.
const FANOUT = { name: 'fanout_ratio', unit: 'msgs/s', baselineName: 'bare ws send loop, batch frames per turn', target: 1.0 };
const PLAIN = { name: 'fanout_plain_ratio', unit: 'msgs/s', baselineName: 'bare ws send loop, one frame per message', target: 1.0 };
const SOCKETIO = { name: 'fanout_plain_vs_socketio', unit: 'msgs/s', baselineName: 'socket.io room broadcast', target: 2.0 };
const NATS = { name: 'fanout_vs_nats', unit: 'msgs/s', baselineName: 'nats-server over WebSocket', target: 1.0 };
const MOSQUITTO = { name: 'fanout_vs_mosquitto', unit: 'msgs/s', baselineName: 'mosquitto over WebSocket (MQTT QoS 0)', target: 1.0 };
/** #34 item 1: the same fan-out through the one origin of `npm start` (the gateway's port), with the client SDK's frames. */
const GATEWAY = { name: 'gateway_fanout_vs_nats', unit: 'msgs/s', baselineName: 'nats-server over WebSocket', target: 1.0 };
const CLIENT_PROCESSES = 2;
const MESSAGE_BYTES = 100;
/** Messages the publisher may have sent but not yet seen delivered back to itself. */
const WINDOW = 32;

interface Target {
  variant: Variant;
  base: string;
  server: WorkerHandle;
  key?: TenantKey;
  topic: string;
}

interface Count {
  delivered: number;
  frames: number;
  open: number;
  atMs: number;
}

/**
 * Delivered messages/s to N subscribers of one channel. The subscribers live
 * in two client processes, the publisher in a third; it publishes 100-byte
 * messages as fast as delivery allows (a bounded window of its own echoes).
 * Ours and the bare ws server each serve two groups on channels of their
 * own: one asking for compact batch frames (`?batch=2`, the client SDK's
 * frames), one for plain frames. Every client counts messages, not frames
 * (a batch frame holds several). The peers (nats-server, mosquitto) are real
 * servers started on loopback, driven by the same client processes; their
 * clients count deliveries by protocol headers, since they pack several
 * messages into one frame.
 */
export const fanout: Scenario = {
  rows: [FANOUT, PLAIN, SOCKETIO, NATS, MOSQUITTO, GATEWAY],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const [wsServer, sioServer, publisher, ...clients] = await Promise.all([
        spawn('ws-baseline'),
        spawn('socketio-baseline'),
        spawn('ws-clients', { label: 'publisher' }),
        ...Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('ws-clients', { label: `subscribers-${i + 1}` })),
      ]);
      const wsPort = (await wsServer.call<{ port: number }>('start')).port;
      const sioPort = (await sioServer.call<{ port: number }>('start')).port;
      const [nats, mosquitto] = await Promise.all([startPeer(spawn, 'nats'), startPeer(spawn, 'mosquitto')]);
      const topic = `tenants/${stack.key.tenantId}/channels/bench-fanout`;
      const plainTopic = `${topic}-plain`;
      const origin = await stack.oneOrigin();
      // Keyed by name (also the clients' group); `origin` speaks the same frames as `relay`.
      const targets: Partial<Record<Variant | 'origin', Target>> = {
        relay: { variant: 'relay', base: stack.realtimeWs, server: stack.workers.realtime, key: stack.key, topic },
        relayPlain: { variant: 'relayPlain', base: stack.realtimeWs, server: stack.workers.realtime, key: stack.key, topic: plainTopic },
        wsBatch: { variant: 'wsBatch', base: `ws://127.0.0.1:${wsPort}`, server: wsServer, topic },
        ws: { variant: 'ws', base: `ws://127.0.0.1:${wsPort}`, server: wsServer, topic: plainTopic },
        socketio: { variant: 'socketio', base: `ws://127.0.0.1:${sioPort}`, server: sioServer, topic },
        origin: { variant: 'relay', base: origin.gatewayWs, server: origin.host, key: origin.key, topic: `tenants/${origin.key.tenantId}/channels/bench-fanout` },
      };
      if (typeof nats !== 'string') targets.nats = { variant: 'nats', base: nats.base, server: nats.worker, topic: 'bench/fanout' };
      if (typeof mosquitto !== 'string') targets.mqtt = { variant: 'mqtt', base: mosquitto.base, server: mosquitto.worker, topic: 'bench/fanout' };
      const variants = Object.keys(targets) as Array<Variant | 'origin'>;
      const per = Math.ceil(budget.subscribers / CLIENT_PROCESSES);
      for (const [name, t] of Object.entries(targets)) {
        const opened = await Promise.all(
          clients.map((c) => c.call<{ opened: number; firstError?: string }>('open', { group: name, variant: t.variant, base: t.base, count: per, concurrency: 25, level: 'subscribed', topic: t.topic, key: t.key })),
        );
        const total = opened.reduce((s, o) => s + o.opened, 0);
        if (total < per * CLIENT_PROCESSES) throw new Error(`${name}: only ${total} subscribers connected (${opened.find((o) => o.firstError)?.firstError})`);
      }
      const countsOf = (variant: Variant | 'origin') => Promise.all(clients.map((c) => c.call<Count>('count', { group: variant })));

      const figures: Record<Variant | 'origin', number[]> = { relay: [], relayPlain: [], ws: [], wsBatch: [], socketio: [], nats: [], mqtt: [], origin: [] };
      const busiestOf: Partial<Record<Variant | 'origin', string>> = {};
      // Messages and the frames that carried them, over every round's measured seconds: batch against batch is like for like only if they group alike.
      const carried: Partial<Record<Variant | 'origin', { delivered: number; frames: number }>> = {};
      for (let round = 0; round < budget.runs; round++) {
        for (const variant of rotate(variants, round)) {
          const t = targets[variant]!;
          await publisher.call('publishStart', { group: variant, variant: t.variant, base: t.base, topic: t.topic, window: WINDOW, bytes: MESSAGE_BYTES, key: t.key });
          await sleep((round === 0 ? budget.warmupSeconds : 0.5) * 1000);
          const cpu = await watchCpu([t.server, ...clients, publisher]);
          const before = await countsOf(variant);
          await sleep(budget.fanoutSeconds * 1000);
          const after = await countsOf(variant);
          const busiest = await cpu();
          await publisher.call('publishStop', { group: variant });
          const rate = after.reduce((sum, a, i) => sum + ((a.delivered - before[i]!.delivered) / (a.atMs - before[i]!.atMs)) * 1000, 0);
          const c = (carried[variant] ??= { delivered: 0, frames: 0 });
          after.forEach((a, i) => {
            c.delivered += a.delivered - before[i]!.delivered;
            c.frames += a.frames - before[i]!.frames;
          });
          figures[variant].push(rate);
          busiestOf[variant] = busiest;
        }
      }
      const dropped: string[] = [];
      for (const variant of variants) {
        const open = (await countsOf(variant)).reduce((s, c) => s + c.open, 0);
        if (open < per * CLIENT_PROCESSES) dropped.push(`${variant} dropped ${per * CLIENT_PROCESSES - open} subscribers`);
      }
      const note = [`${per * CLIENT_PROCESSES} subscribers in ${CLIENT_PROCESSES} processes, ${MESSAGE_BYTES}-byte data, window ${WINDOW}`, ...dropped].join('; ');
      const perFrame = (variant: Variant | 'origin'): string => {
        const c = carried[variant];
        return c && c.frames > 0 ? (c.delivered / c.frames).toFixed(1) : 'n/a';
      };
      const grouping = (ours: Variant | 'origin', theirs: Variant | 'origin') => `messages per frame: ours ${perFrame(ours)}, baseline ${perFrame(theirs)}`;
      const peerRow = (row: typeof NATS, variant: Variant, peer: typeof nats): Row =>
        typeof peer === 'string'
          ? failedRow(row.name, row.unit, row.baselineName, row.target, peer)
          : makeRow({ ...row, baselineName: row.baselineName.replace(/^(\S+)/, `$1 ${peer.version}`), ours: figures.relay, baseline: figures[variant], quick: budget.quick, limitedBy: busiestOf.relay, baselineLimitedBy: busiestOf[variant], note: `${note}; ours batch frames (?batch=2); ${grouping('relay', variant)}` });
      return [
        makeRow({ ...FANOUT, ours: figures.relay, baseline: figures.wsBatch, quick: budget.quick, limitedBy: busiestOf.relay, baselineLimitedBy: busiestOf.wsBatch, note: `${note}; both sides batch frames (?batch=2); ${grouping('relay', 'wsBatch')}` }),
        makeRow({ ...PLAIN, ours: figures.relayPlain, baseline: figures.ws, quick: budget.quick, limitedBy: busiestOf.relayPlain, baselineLimitedBy: busiestOf.ws, note: `${note}; both sides one frame per message; ${grouping('relayPlain', 'ws')}` }),
        makeRow({ ...SOCKETIO, ours: figures.relayPlain, baseline: figures.socketio, quick: budget.quick, limitedBy: busiestOf.relayPlain, baselineLimitedBy: busiestOf.socketio, note: `${note}; ours one frame per message, as socket.io sends` }),
        peerRow(NATS, 'nats', nats),
        peerRow(MOSQUITTO, 'mqtt', mosquitto),
        typeof nats === 'string'
          ? failedRow(GATEWAY.name, GATEWAY.unit, GATEWAY.baselineName, GATEWAY.target, nats)
          : makeRow({ ...GATEWAY, baselineName: `nats-server ${nats.version} over WebSocket`, ours: figures.origin, baseline: figures.nats, quick: budget.quick, limitedBy: busiestOf.origin, baselineLimitedBy: busiestOf.nats, note: `${note}; ours through npm start's gateway port (every service in one process, in-process bus; the gateway hands the upgrade to realtime), batch frames (?batch=2); ${grouping('origin', 'nats')}` }),
      ];
    }),
};
