// The sessions view: a filtered list (Σ tokens each) and one session's detail: facts, actions, the five
// token cards, the provider token timeline and the history.
import { $, act, api, debounce, fmt, h, sessionPath, when } from './api.js';
import { renderCards, renderHistory } from './session-parts.js';
import { renderTimeline } from './timeline.js';

const CHANNELS = ['telegram', 'discord', 'slack', 'webchat', 'cli', 'api', 'internal'];
const RUN_STATES = ['idle', 'running', 'continuing', 'paused', 'blocked', 'budget-limited', 'completed', 'failed'];
const PAGE = 500;

let selected;
let sessions = [];
let nextCursor;
let detail;
// Answers of an older request are dropped when a newer one was sent (live updates come in bursts).
let listSeq = 0;
let detailSeq = 0;

/** Fills the filters (agents from `GET /v1/models`) and wires them. */
export function initSessions(agents) {
  $('f-channel').append(...CHANNELS.map((c) => h('option', { value: c, text: c })));
  $('f-agent').append(...agents.map((a) => h('option', { value: a, text: a })));
  $('f-run').append(...RUN_STATES.map((s) => h('option', { value: s, text: s })));
  for (const id of ['f-channel', 'f-agent', 'f-active']) $(id).addEventListener('change', () => loadList());
  $('f-run').addEventListener('change', renderList);
  $('f-search').addEventListener('input', debounce(renderList, 120));
  $('session-filters').addEventListener('submit', (e) => e.preventDefault());
  $('sessions-more').addEventListener('click', () => loadList(true));
}

/** Shows the list and, when `key` is given, that session's detail. */
export async function showSessions(key) {
  const changed = key !== selected;
  selected = key;
  document.querySelector('.sessions-layout').classList.toggle('has-detail', Boolean(key));
  if (!key) $('session-detail').replaceChildren(h('p', { class: 'empty', text: 'Select a session to see its tokens, timeline and history.' }));
  await Promise.all([loadList(), key ? loadDetail(key, changed) : undefined]);
}

/** Live update: sessions changed (turns, resets, new sessions). */
export function onSessionEvents(keys) {
  void loadList();
  if (selected && keys.has(selected)) void loadDetail(selected, false);
}

async function loadList(more = false) {
  const query = new URLSearchParams({ limit: String(PAGE) });
  if ($('f-channel').value) query.set('channel', $('f-channel').value);
  if ($('f-agent').value) query.set('agent', $('f-agent').value);
  if ($('f-active').value === '1') query.set('active', '1');
  if (more && nextCursor) query.set('cursor', nextCursor);
  const seq = ++listSeq;
  try {
    const page = await api(`/admin/sessions?${query}`);
    if (seq !== listSeq) return;
    sessions = more ? [...sessions, ...page.sessions] : page.sessions;
    nextCursor = page.nextCursor;
  } catch (e) {
    $('sessions-count').textContent = `Could not list sessions: ${e.message}`;
    return;
  }
  renderList();
}

function renderList() {
  const words = $('f-search').value.trim().toLowerCase();
  const run = $('f-run').value;
  const inactive = $('f-active').value === '0';
  const shown = sessions
    .filter((s) => (!run || s.runState === run) && (!inactive || !s.active))
    .filter((s) => !words || [s.key, s.displayName, s.peerId, s.channel].some((v) => v?.toLowerCase().includes(words)))
    .sort((a, b) => b.updatedAt - a.updatedAt);
  const sum = shown.reduce((n, s) => n + s.totalTokens, 0);
  $('sessions-count').textContent = `${shown.length} session${shown.length === 1 ? '' : 's'} · Σ ${fmt(sum)} tokens`;
  const focused = document.activeElement?.dataset?.key;
  const list = $('session-list');
  list.replaceChildren(...shown.map((s) => h('li', {}, h('a', { href: `#/sessions/${encodeURIComponent(s.key)}`, 'data-key': s.key, 'aria-current': s.key === selected ? 'true' : undefined },
    h('div', { class: 'key' }, s.active ? h('span', { class: 'dot', title: 'active (in memory)' }) : '', s.key),
    h('div', { class: 'meta', text: [s.displayName, s.agentId, s.channel, `Σ ${fmt(s.totalTokens)} tokens`, s.runState !== 'idle' ? s.runState : '', when(s.updatedAt)].filter(Boolean).join(' · ') })))));
  if (focused) [...list.querySelectorAll('a')].find((a) => a.dataset.key === focused)?.focus();
  $('sessions-more').hidden = !nextCursor;
}

function skeleton(key) {
  const el = {
    facts: h('dl', { class: 'facts' }),
    cards: h('div', { class: 'cards', 'aria-label': 'Tokens of this key (all its sessions)' }),
    timeline: h('div', { class: 'timeline' }),
    history: h('ol', { class: 'log', 'aria-label': 'History' }),
  };
  const button = (action, label, question, run) => {
    const b = h('button', { type: 'button', class: action === 'stop' ? 'danger' : 'ghost', 'data-action': action, text: label });
    b.addEventListener('click', () => act(b, question, async () => {
      const message = await run();
      void loadDetail(key, false);
      return message;
    }));
    return b;
  };
  const post = (action) => api(`${sessionPath(key)}/${action}`, { method: 'POST', body: {} });
  $('session-detail').replaceChildren(
    h('a', { class: 'back', href: '#/sessions', text: '← All sessions' }),
    h('div', { class: 'detail-head' }, h('h2', { text: key }), el.facts, h('div', { class: 'actions' },
      button('reset', 'Reset…', { title: 'Reset this session?', text: `${key} gets a new session id; the current transcript is archived. Its token totals stay.`, ok: 'Reset' },
        async () => `Reset: new session id ${(await post('reset')).sessionId}`),
      button('compact', 'Compact…', { title: 'Compact this session?', text: 'Older messages are summarized by the model now (this costs tokens).', ok: 'Compact' },
        async () => (await post('compact')).message),
      button('stop', 'Stop…', { title: 'Stop this session?', text: 'Stops the running turn, if any, and pauses its goal run.', ok: 'Stop' },
        async () => { const r = await post('stop'); return r.stopped ? 'Stopped the running turn.' : `No turn was running; run state ${r.runState}.`; }))),
    el.cards,
    h('section', {}, h('h3', { text: 'Provider token timeline' }), el.timeline),
    h('section', {}, h('h3', { text: 'History' }), el.history),
  );
  return el;
}

function fact(name, label, value) {
  if (value === undefined || value === null || value === '') return [];
  return [h('div', {}, h('dt', { text: label }), h('dd', { 'data-field': name }, value))];
}

async function loadDetail(key, fresh) {
  const seq = ++detailSeq;
  let entry; let history; let timeline;
  try {
    [entry, history, timeline] = await Promise.all([
      api(sessionPath(key)), api(`${sessionPath(key)}/history?limit=300`), api(`${sessionPath(key)}/timeline?limit=100`),
    ]);
  } catch (e) {
    if (key === selected && seq === detailSeq) $('session-detail').replaceChildren(h('a', { class: 'back', href: '#/sessions', text: '← All sessions' }), h('p', { class: 'error', text: e.message }));
    detail = undefined;
    return;
  }
  if (key !== selected || seq !== detailSeq) return;
  if (fresh || !detail || detail.key !== key || !detail.el.facts.isConnected) detail = { key, el: skeleton(key) };
  const { el } = detail;
  const cp = entry.checkpoint;
  el.facts.replaceChildren(
    ...fact('sessionId', 'session id', h('span', { class: 'mono', text: entry.sessionId })),
    ...fact('agent', 'agent', entry.agentId),
    ...fact('channel', 'channel', `${entry.channel} · ${entry.accountId} · ${entry.chatType}`),
    ...fact('name', 'name', entry.displayName),
    ...fact('runState', 'run state', entry.runState + (entry.active ? ' · active' : '')),
    ...fact('goal', 'goal', entry.goal),
    ...fact('checkpoint', 'checkpoint', cp ? `batch ${cp.batch} · call ${cp.iteration}${cp.toolCalls ? ` · ${cp.toolCalls} tool calls` : ''}` : ''),
    ...fact('budget', 'token budget', entry.tokenBudget ? `${fmt(entry.tokenBudget.used)} / ${fmt(entry.tokenBudget.budget)}` : ''),
    ...fact('messages', 'messages', fmt(entry.messageCount)),
    ...fact('context', 'context tokens', fmt(entry.contextTokens)),
    ...fact('compactions', 'compactions', fmt(entry.compactionCount)),
    ...fact('started', 'session started', when(entry.sessionStartedAt)),
    ...fact('updated', 'updated', when(entry.updatedAt)),
    ...fact('reset', 'last reset', entry.lastResetReason),
    ...fact('model', 'model override', entry.overrides?.model),
    ...fact('parent', 'parent', entry.parentKey ? h('a', { href: `#/sessions/${encodeURIComponent(entry.parentKey)}`, text: entry.parentKey }) : ''),
  );
  renderCards(el.cards, entry);
  renderTimeline(el.timeline, timeline.turns);
  renderHistory(el.history, history.entries);
}
