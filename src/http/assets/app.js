// The dashboard: views by URL hash (#/sessions[/<key>], #/chat, #/channels, #/runs (runs and jobs), #/providers, #/pairing),
// kept current by one Server-Sent Events stream (GET /dashboard/events) that reconnects after a restart.
import { $, api, debounce, toast } from './api.js';
import { initChat, onSessionEvents as chatSessionsChanged, showChat } from './chat.js';
import { renderPairing, renderStatus, showJobs, showProviders, showRuns } from './ops.js';
import { initSessions, onSessionEvents as listSessionsChanged, showSessions } from './sessions.js';

const VIEWS = ['sessions', 'chat', 'channels', 'runs', 'providers', 'pairing'];
const state = { view: undefined, status: undefined, startedAt: undefined, changed: new Set() };

function parseHash() {
  const m = /^#\/(\w+)(?:\/(.+))?$/.exec(location.hash);
  const view = m && VIEWS.includes(m[1]) ? m[1] : 'sessions';
  return { view, arg: m?.[2] ? decodeURIComponent(m[2]) : undefined };
}

/** Shows the view the URL names and loads what it needs. */
async function route() {
  const { view, arg } = parseHash();
  if (view !== state.view) {
    state.view = view;
    for (const name of VIEWS) $(`view-${name}`).hidden = name !== view;
    for (const a of document.querySelectorAll('nav a')) {
      if (a.dataset.view === view) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }
  try {
    if (view === 'sessions') await showSessions(arg);
    else if (view === 'chat') await showChat();
    // Jobs only on a gateway whose /status lists them (one that runs the scheduler).
    else if (view === 'runs') await Promise.all([showRuns(), state.status?.jobs ? showJobs() : undefined]);
    else if (view === 'providers') await showProviders(state.status);
    else if (view === 'pairing') renderPairing(await api('/admin/pairing'));
    else if (view === 'channels' && state.status) renderStatus(state.status);
  } catch (e) {
    toast(e.message, true);
  }
}

/** Session events come in bursts (turn start, each LLM call, turn end): handled together. */
const flushSessions = debounce(() => {
  const keys = new Set(state.changed);
  state.changed.clear();
  if (state.view === 'sessions') listSessionsChanged(keys);
  else if (state.view === 'chat') chatSessionsChanged(keys);
  else if (state.view === 'runs') void showRuns().catch(() => undefined);
  else if (state.view === 'providers') void showProviders(state.status).catch(() => undefined);
}, 100);

function setLive(on) {
  $('live').textContent = on ? 'live' : 'reconnecting…';
  $('live').classList.toggle('on', on);
}

let source;
let missed = false;
function connect() {
  source?.close();
  source = new EventSource('/dashboard/events');
  source.addEventListener('hello', (e) => {
    const hello = JSON.parse(e.data);
    setLive(true);
    // After a restart or a dropped connection, events may have been missed: reload what is shown.
    if (missed || (state.startedAt && hello.startedAt !== state.startedAt)) void route();
    missed = false;
    state.startedAt = hello.startedAt;
  });
  source.addEventListener('status', (e) => {
    const jobsBefore = JSON.stringify(state.status?.jobs);
    state.status = JSON.parse(e.data);
    renderStatus(state.status);
    // A run ended or a job changed: the jobs table follows.
    if (state.view === 'runs' && state.status.jobs && JSON.stringify(state.status.jobs) !== jobsBefore) void showJobs().catch(() => undefined);
  });
  source.addEventListener('pairing', (e) => renderPairing(JSON.parse(e.data)));
  source.addEventListener('signed-out', () => {
    source.close();
    location.replace('/');
  });
  source.addEventListener('session', (e) => {
    state.changed.add(JSON.parse(e.data).key);
    flushSessions();
  });
  source.addEventListener('error', () => {
    setLive(false);
    missed = true;
    // The browser retries by itself after a network error; a refused stream (401, 503) needs a new one.
    if (source.readyState === EventSource.CLOSED) setTimeout(reconnect, 2000);
  });
}

async function reconnect() {
  try {
    const session = await (await fetch('/dashboard/session')).json();
    if (!session.signedIn) {
      location.reload();
      return;
    }
  } catch { /* the gateway is still away: try again */ }
  connect();
}

async function boot() {
  const session = await (await fetch('/dashboard/session')).json();
  $('sign-out').hidden = session.via !== 'cookie';
  $('sign-out').addEventListener('click', async () => {
    await fetch('/dashboard/sign-out', { method: 'POST' });
    location.replace('/');
  });
  const models = await api('/v1/models').catch(() => ({ data: [] }));
  initSessions(models.data.filter((m) => m.agent).map((m) => m.id));
  initChat();
  window.addEventListener('hashchange', () => void route());
  if (!location.hash) history.replaceState(null, '', '#/sessions');
  await route();
  connect();
}

void boot();
