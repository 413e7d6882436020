/* global document, fetch */
import { createRelayClient } from '/sdk/index.js';

const $ = (id) => document.getElementById(id);

async function post(path, body, session) {
  const res = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(session ? { authorization: `Bearer ${session}` } : {}) },
    body: JSON.stringify(body ?? {}),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(json.message ?? json.errors?.[0] ?? `HTTP ${res.status}`);
  return json;
}

function showState(s) {
  const state = $('conn-state');
  state.textContent = s.status;
  state.className = s.status;
  $('conn-count').textContent = String(s.connections);
  $('refresh-count').textContent = String(s.refreshes);
  $('expires-at').textContent = s.expiresAt ? new Date(s.expiresAt * 1000).toLocaleTimeString() : '–';
}

function showMessage(m) {
  const li = document.createElement('li');
  li.dataset.id = m.id;
  const who = document.createElement('b');
  who.textContent = `${m.data?.name ?? m.userId}:`;
  li.append(who, document.createTextNode(String(m.data?.text ?? JSON.stringify(m.data))));
  $('messages').append(li);
}

$('login').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('login-error').hidden = true;
  let login;
  try {
    login = await post('/api/login', { name: $('name').value });
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

  // The first token comes with the login; every later one from the host's token endpoint.
  let first = login;
  const getToken = async () => {
    if (first) {
      const t = first;
      first = undefined;
      return t;
    }
    return post('/api/token', {}, login.session);
  };
  const client = createRelayClient({ url: login.ws_url, getToken, onState: showState });
  client.subscribe(login.channel, showMessage);

  $('send').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('text').value.trim();
    if (!text) return;
    client.publish(login.channel, { name: login.name, text });
    $('text').value = '';
  });
});
