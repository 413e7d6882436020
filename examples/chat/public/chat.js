/* global document, fetch, crypto */
// The chat page on @service-relay/client (served at /sdk/ from packages/client/dist).
import { createRelayClient } from '/sdk/index.js';

const $ = (id) => document.getElementById(id);
const STATE_TEXT = { idle: 'connecting', connecting: 'connecting', open: 'connected', reconnecting: 'reconnecting', closed: 'closed' };

async function post(path, session) {
  const res = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(session ? { authorization: `Bearer ${session}` } : {}) },
    body: JSON.stringify(session ? {} : { name: $('name').value }),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(json.message ?? json.errors?.[0] ?? `HTTP ${res.status}`);
  return json;
}

function showMessage(m) {
  const li = document.createElement('li');
  li.dataset.id = m.id;
  const who = document.createElement('b');
  who.textContent = `${m.data?.name ?? m.userId}:`;
  li.append(who, document.createTextNode(String(m.data?.text ?? JSON.stringify(m.data))));
  $('messages').append(li);
}

function showNote(text) {
  const li = document.createElement('li');
  li.className = 'note';
  li.textContent = text;
  $('messages').append(li);
}

$('login').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('login-error').hidden = true;
  let login;
  try {
    login = await post('/api/login');
  } catch (err) {
    $('login-error').textContent = err.message;
    $('login-error').hidden = false;
    return;
  }
  $('login').hidden = true;
  $('chat').hidden = false;
  $('status').hidden = false;
  $('me').textContent = login.name;
  $('channel').textContent = login.channel;

  // The first token comes with the login; every later one (reconnects, refreshes) from the host's token endpoint.
  let first = login.token;
  const getToken = async () => {
    if (first) {
      const t = first;
      first = undefined;
      return t;
    }
    return (await post('/api/token', login.session)).token;
  };
  const client = createRelayClient({ url: login.ws_url, getToken });
  let connections = 0;
  let refreshes = 0;
  const expires = (s) => ($('expires-at').textContent = new Date(s * 1000).toLocaleTimeString());
  client.on('state', (s) => {
    $('conn-state').textContent = STATE_TEXT[s] ?? s;
    $('conn-state').className = STATE_TEXT[s] ?? s;
  });
  client.on('ready', (r) => {
    $('conn-count').textContent = String(++connections);
    expires(r.expiresAt);
  });
  client.on('token_refreshed', (r) => {
    $('refresh-count').textContent = String(++refreshes);
    expires(r.expiresAt);
  });
  client.on('message', (m) => m.channel === login.channel && showMessage(m));
  client.on('gap', (g) => showNote(`some earlier messages on ${g.channel} are gone (${g.reason})`));
  // The whole retained history first, then live messages.
  await client.subscribe(login.channel, { after: '0-0' });

  $('send').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = $('text').value.trim();
    if (!text) return;
    $('text').value = '';
    // One key per message: a retry after a lost connection is stored once.
    const idempotencyKey = crypto.randomUUID();
    for (;;) {
      try {
        await client.publish(login.channel, { name: login.name, text }, { idempotencyKey });
        return;
      } catch (err) {
        if (err.code !== 'connection_lost' && err.code !== 'timeout') return showNote(`not sent (${err.code}): ${text}`);
        if (client.state !== 'open') await new Promise((resolve) => client.once('ready', resolve));
      }
    }
  });
});
