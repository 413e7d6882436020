import { createHook } from 'node:async_hooks';

/** One of Node's tick objects, held for the life of the process (see pinTickObjectShape). */
let pinned: object | undefined;

function noop(): void {}

/**
 * Keeps `process.nextTick` at full speed in a process that goes quiet.
 *
 * Node 20's `process.nextTick` builds each queued tick as an object literal
 * with two symbol-keyed members; V8's optimized code for it refers to that
 * object's hidden class (map) weakly. When nothing holds a tick object (the
 * queue is empty, as in an idle process) a full GC can collect the map, V8
 * throws the optimized code away ("deoptimization, reason: weak objects") and
 * the code it optimizes next is about 5× slower per call (0.06 → 0.30 µs on
 * an AMD EPYC, `node --expose-gc`, a hot loop of ticks before and after two
 * idle GCs), for the rest of the process. Node's HTTP and stream code calls
 * it about a dozen times per proxied request: profiled in the bench, the
 * gateway's process spent 2.5–3.8% of its CPU in `nextTick` itself after a
 * quiet spell against 0.5–0.6% before it (7.2 CPU-µs per request over the
 * run, the no-auth gateway 0.95; bench/README.md "What limits each figure").
 *
 * One tick object, captured as Node creates it (an async hook enabled only
 * for that one call) and held here, keeps the map alive, so the optimized
 * code stays. It costs one small object. Idempotent; a Node that creates no
 * `TickObject` resource leaves nothing pinned. Returns whether one is held.
 */
export function pinTickObjectShape(): boolean {
  if (pinned !== undefined) return true;
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject') pinned ??= resource;
    },
  });
  hook.enable();
  try {
    process.nextTick(noop);
  } finally {
    hook.disable();
  }
  return pinned !== undefined;
}
