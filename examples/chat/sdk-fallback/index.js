/* global WebSocket, setTimeout, clearTimeout, crypto */
// A stand-in for @service-relay/client's browser build, served at /sdk/index.js
// only while packages/client/dist is missing: the few calls the chat page
// needs, following docs/PROTOCOL.md section 5 (a client's loop).

const isNewer = (a, b) => {
  const [am, as] = a.split('-').map(Number);
  const [bm, bs] = b.split('-').map(Number);
  return am !== bm ? am > bm : as > bs;
};

/**
 * getToken() resolves to {token, expires_at}: called before every connection
 * and again before each expiry, when the token is refreshed in place (an
 * `auth` frame on the open connection).
 */
export function createRelayClient({ url, getToken, onState = () => {} }) {
  const subs = new Map(); // channel -> {onMessage, lastId, epoch}
  const pending = new Map(); // idempotency key -> {channel, data}, until `published`
  let ws;
  let tenantId;
  let closed = false;
  let refreshTimer;
  let backoff = 250;
  const state = { status: 'connecting', connections: 0, refreshes: 0, expiresAt: 0 };
  const emit = () => onState({ ...state });
  const send = (frame) => ws && ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify(frame));
  const topicOf = (channel) => `tenants/${tenantId}/channels/${channel}`;
  const subOf = (topic) => subs.get(topic.slice(topic.lastIndexOf('/') + 1));

  // With `after` (the last id seen, or the start) nothing published meanwhile is missed.
  const subscribe = (channel) => {
    const s = subs.get(channel);
    send({ type: 'subscribe', topic: topicOf(channel), after: s.lastId ?? '0-0', ...(s.epoch ? { epoch: s.epoch } : {}) });
  };
  const publish = (key, p) => send({ type: 'publish', topic: topicOf(p.channel), data: p.data, idempotency_key: key, ref: key });

  // Refresh at 80 % of the lifetime or a minute before expiry, whichever is earlier, but not in the first half.
  const scheduleRefresh = () => {
    clearTimeout(refreshTimer);
    const life = state.expiresAt * 1000 - Date.now();
    const delay = Math.max(life / 2, Math.min(life * 0.8, life - 60_000));
    refreshTimer = setTimeout(async () => {
      try {
        const { token } = await getToken();
        send({ type: 'auth', token, ref: 'refresh' });
      } catch {
        refreshTimer = setTimeout(scheduleRefresh, 1000);
      }
    }, delay);
  };

  const connect = async () => {
    if (closed) return;
    let token;
    try {
      ({ token } = await getToken());
    } catch {
      return retry();
    }
    ws = new WebSocket(`${url}?access_token=${encodeURIComponent(token)}`);
    ws.onmessage = (ev) => {
      const f = JSON.parse(ev.data);
      if (f.type === 'ready') {
        backoff = 250;
        tenantId = f.tenant_id;
        state.status = 'connected';
        state.connections += 1;
        state.expiresAt = f.expires_at;
        for (const channel of subs.keys()) subscribe(channel);
        for (const [key, p] of pending) publish(key, p);
        scheduleRefresh();
        emit();
      } else if (f.type === 'subscribed') {
        const s = subOf(f.topic);
        if (s) s.epoch = f.epoch;
      } else if (f.type === 'message') {
        const s = subOf(f.topic);
        if (!s || (s.lastId && !isNewer(f.id, s.lastId))) return;
        s.lastId = f.id;
        s.onMessage({ id: f.id, userId: f.user_id, data: f.data, createdAt: f.created_at });
      } else if (f.type === 'published') {
        pending.delete(f.ref);
      } else if (f.type === 'authenticated') {
        state.refreshes += 1;
        state.expiresAt = f.expires_at;
        scheduleRefresh();
        emit();
      }
    };
    ws.onclose = () => {
      clearTimeout(refreshTimer);
      if (closed) return;
      state.status = 'reconnecting';
      emit();
      retry();
    };
  };

  const retry = () => {
    const delay = backoff / 2 + Math.random() * (backoff / 2);
    backoff = Math.min(backoff * 2, 5000);
    setTimeout(connect, delay);
  };

  void connect();
  return {
    subscribe(channel, onMessage) {
      subs.set(channel, { onMessage, lastId: undefined, epoch: undefined });
      if (tenantId) subscribe(channel);
    },
    /** Sent with an idempotency key and sent again after a reconnect until answered: stored once. */
    publish(channel, data) {
      const key = crypto.randomUUID();
      pending.set(key, { channel, data });
      if (tenantId) publish(key, { channel, data });
    },
    close() {
      closed = true;
      clearTimeout(refreshTimer);
      ws?.close(1000);
    },
  };
}
