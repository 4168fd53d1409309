// The gateway views: channels (and MCP servers) with their health, runs and scheduled jobs, providers, pairing.
import { $, act, api, fmt, h, table, toast, when } from './api.js';

const sessionLink = (key) => h('a', { href: `#/sessions/${encodeURIComponent(key)}`, class: 'mono', text: key });

/** A channel's health as `/readyz` judges it (running, standby and disabled are ready), with the supervisor's reason. */
export function channelHealth(c) {
  const s = c.supervision;
  if (c.status === 'running') return { label: 'connected', tone: 'ok' };
  if (c.status === 'standby') return { label: 'standby', tone: 'ok' };
  if (c.status === 'disabled') return { label: 'disabled', tone: 'off' };
  if (c.status === 'stopped' && !s) return { label: 'stopped', tone: 'bad', failing: true };
  if (c.status === 'failed' || s?.state === 'gave-up' || s?.state === 'retrying') return { label: 'failed', tone: 'bad', failing: true };
  return { label: 'connecting', tone: 'warn', failing: true };
}

/** The readiness line: the server's own `/readyz` report, sent with the status (`status.readiness`). */
function readyLine(readiness, failing) {
  if (!readiness) {
    return failing.length
      ? `Not ready: ${failing.map((c) => `${c.id}/${c.accountId}`).join(', ')} ${failing.length === 1 ? 'is' : 'are'} not connected.`
      : 'Every enabled channel is connected.';
  }
  if (readiness.ready) return 'Ready: the store answers and every enabled channel is connected (GET /readyz answers 200).';
  const part = (f) => (f.part === 'store' ? `the session store (${f.error})` : f.part === 'gateway' ? `the gateway is ${f.error}`
    : f.part === 'mcp' ? `MCP server ${f.name} (${f.error})` : `${f.name} (${f.error})`);
  return `Not ready (GET /readyz answers 503): ${readiness.failing.map(part).join('; ')}.`;
}

/** Replies of one channel that the platform never took, with the latest one's reason (SPEC §16). */
function undelivered(deliveries, name) {
  const count = deliveries?.failed?.[name] ?? 0;
  if (!count) return '';
  const last = [...(deliveries.recent ?? [])].reverse().find((f) => `${f.channel}/${f.accountId}` === name);
  const detail = last ? ` · last ${when(last.at)} to ${last.chatId}${last.correlationId ? ` (ref ${last.correlationId})` : ''}: ${last.error}` : '';
  return h('p', { class: 'error undelivered', 'data-undelivered': String(count), text: `${fmt(count)} repl${count === 1 ? 'y' : 'ies'} not delivered since start${detail}` });
}

/** Channel and MCP cards, the readiness line and the nav badges, from a `/status` report. */
export function renderStatus(status) {
  const channels = status.channels;
  // The server's readiness names the failing channels when it is there; `api` is not one /readyz checks.
  const notReady = status.readiness ? new Set(status.readiness.failing.filter((f) => f.part === 'channel').map((f) => f.name)) : undefined;
  const failing = channels.filter((c) => (notReady ? notReady.has(`${c.id}/${c.accountId}`) : channelHealth(c).failing));
  $('channels-badge').hidden = failing.length === 0;
  $('channels-badge').textContent = String(failing.length);
  $('runs-badge').hidden = status.queue.running === 0;
  $('runs-badge').textContent = String(status.queue.running);
  $('gateway-line').textContent = [
    `v${status.version}`,
    `${fmt(status.sessions.active)} active / ${status.sessions.persisted === null ? '?' : fmt(status.sessions.persisted)} stored sessions`,
    `${status.queue.running} running, ${status.queue.queued} queued`,
    failing.length ? `${failing.length} channel${failing.length === 1 ? '' : 's'} not connected` : 'all channels connected',
    status.readiness ? (status.readiness.ready ? 'ready' : 'not ready') : '',
  ].filter(Boolean).join(' · ');
  $('queue-line').textContent = `${status.queue.running} turn${status.queue.running === 1 ? '' : 's'} running · ${status.queue.queued} message${status.queue.queued === 1 ? '' : 's'} queued on session lanes`;
  $('ready-line').textContent = readyLine(status.readiness, failing);
  $('ready-line').dataset.ready = status.readiness ? String(status.readiness.ready) : '';
  $('ready-line').classList.toggle('error', status.readiness ? !status.readiness.ready : failing.length > 0);
  $('channel-list').replaceChildren(...channels.map((c) => {
    const health = channelHealth(c);
    const s = c.supervision;
    const reason = s?.lastError ?? c.detail;
    return h('li', { class: health.tone === 'bad' ? 'failed' : '', 'data-channel': `${c.id}/${c.accountId}`, 'data-health': health.label },
      h('h3', {}, h('span', { text: `${c.id}/${c.accountId}` }), h('span', { class: `state ${health.tone}`, text: health.label })),
      health.label !== 'connected' && reason ? h('p', { class: 'error reason', text: reason }) : '',
      s?.state === 'retrying' && s.nextRetryAt ? h('p', { class: 'muted', text: `retrying at ${when(s.nextRetryAt)} (attempt ${s.attempts + 1})` }) : '',
      s?.state === 'gave-up' ? h('p', { class: 'muted', text: 'not retried: fix the token or configuration, then restart' }) : '',
      s?.connectedAt && health.label === 'connected' ? h('p', { class: 'muted', text: `connected since ${when(s.connectedAt)}` }) : '',
      c.id === 'api' ? h('p', { class: 'muted', text: 'the HTTP API and web chat' }) : '',
      undelivered(status.deliveries, `${c.id}/${c.accountId}`));
  }));
  $('mcp-list').replaceChildren(...(status.mcp.length ? status.mcp.map((m) => {
    const tone = m.state === 'ready' ? 'ok' : m.state === 'failed' ? 'bad' : 'warn';
    return h('li', { class: tone === 'bad' ? 'failed' : '', 'data-mcp': m.name, 'data-state': m.state },
      h('h3', {}, h('span', { text: m.name }), h('span', { class: `state ${tone}`, text: m.state })),
      h('p', { class: 'muted', text: `${m.transport} · ${fmt(m.tools)} tool${m.tools === 1 ? '' : 's'}` }),
      m.error ? h('p', { class: 'error', text: m.error }) : '');
  }) : [h('li', { class: 'muted', text: 'No MCP servers configured (mcp.servers).' })]));
}

export async function showRuns() {
  const { runs } = await api('/admin/runs');
  $('runs').replaceChildren(table([
    ['session', (r) => sessionLink(r.sessionKey)],
    ['run state', (r) => r.runState],
    ['goal', (r) => r.goal ?? '', 'wrap'],
    ['batch · call', (r) => (r.checkpoint ? `${r.checkpoint.batch} · ${r.checkpoint.iteration}` : '')],
    ['turn running', (r) => (r.turnRunning ? 'yes' : 'no')],
    ['queued', (r) => r.queued, 'num'],
    ['updated', (r) => when(r.updatedAt)],
    ['', (r) => {
      const b = h('button', { type: 'button', class: 'danger small', text: 'Stop…' });
      b.addEventListener('click', () => act(b, { title: 'Stop this run?', text: `Stops the running turn of ${r.sessionKey} and pauses its goal run.`, ok: 'Stop' }, async () => {
        const out = await api(`/admin/sessions/${encodeURIComponent(r.sessionKey)}/stop`, { method: 'POST', body: {} });
        void showRuns();
        return out.stopped ? 'Stopped the running turn.' : `No turn was running; run state ${out.runState}.`;
      }));
      return b;
    }],
  ], runs, 'No run is running or continuing.'));
}

// Scheduled jobs (SPEC §17), a table under the runs: schedule, next run, last run and its outcome, and the
// actions "run now" and pause/resume through /admin/jobs. Reloaded when the view opens, after an action, and
// when the jobs part of /status changes (a run ended, a job was added elsewhere).

/** How a run's outcome reads: delivered and silent are fine, the others are problems. */
const OUTCOME_TONE = { delivered: 'ok', silent: 'off', failed: 'bad', undeliverable: 'bad', budget: 'warn' };

const jobPath = (id) => `/admin/jobs/${encodeURIComponent(id)}`;

/** A button that runs `run` at once (no confirmation: pausing is undone by resuming). */
function direct(label, run) {
  const b = h('button', { type: 'button', class: 'ghost small', text: label });
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      toast(await run());
    } catch (e) {
      toast(e.message, true);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

function jobState(j) {
  if (j.job.enabled === false) return h('span', { class: 'state off', 'data-state': 'disabled', text: 'disabled' });
  if (j.state.paused) return h('span', { class: 'state warn', 'data-state': 'paused', text: 'paused' });
  return h('span', { class: 'state ok', 'data-state': 'active', text: 'active' });
}

function jobLastRun(j) {
  if (!j.state.lastRunAt) return h('span', { class: 'muted', text: 'never' });
  const outcome = j.state.lastOutcome ?? '';
  return h('span', { title: j.state.lastError ?? '' }, `${when(j.state.lastRunAt)} `,
    h('span', { class: `state ${OUTCOME_TONE[outcome] ?? 'off'}`, 'data-outcome': outcome, text: outcome }));
}

function jobActions(j) {
  const run = h('button', { type: 'button', class: 'small', text: 'Run now…' });
  run.addEventListener('click', () => act(run, { title: `Run job ${j.job.id} now?`, text: 'It runs once, whatever its schedule, and delivers its answer as usual.', ok: 'Run now' }, async () => {
    await api(`${jobPath(j.job.id)}/run`, { method: 'POST', body: {} });
    void showJobs();
    return `Queued a run of ${j.job.id}.`;
  }));
  const paused = Boolean(j.state.paused);
  const toggle = direct(paused ? 'Resume' : 'Pause', async () => {
    const view = await api(`${jobPath(j.job.id)}/${paused ? 'resume' : 'pause'}`, { method: 'POST', body: {} });
    renderJobs(await api('/admin/jobs').then((r) => r.jobs).catch(() => [view]));
    return paused ? `Resumed ${j.job.id}.` : `Paused ${j.job.id}.`;
  });
  return h('span', { class: 'actions' }, run, ' ', toggle);
}

/** The jobs table from `GET /admin/jobs`'s `jobs`. */
export function renderJobs(jobs) {
  $('jobs').replaceChildren(table([
    ['job', (j) => h('span', { class: 'mono', 'data-job': j.job.id, text: j.job.id })],
    ['schedule', (j) => (j.job.timezone ? `${j.job.schedule} (${j.job.timezone})` : j.job.schedule)],
    ['next run', (j) => when(j.nextRunAt)],
    ['last run', jobLastRun],
    ['runs', (j) => j.state.runs ?? 0, 'num'],
    ['state', jobState],
    ['', jobActions],
  ], jobs, 'No jobs. Add one with switchboard jobs add, or ask the agent to schedule one.'));
}

/** Loads and shows the jobs (called only for a gateway whose /status lists jobs). */
export async function showJobs() {
  const { jobs } = await api('/admin/jobs');
  $('jobs-part').hidden = false;
  renderJobs(jobs);
}

/** Failovers since start (the latest) and keys cooling down, from `GET /status`'s `failovers`. */
function failoverParts(f) {
  if (!f) return [];
  return [
    h('h2', { text: `Failovers (${fmt(f.total)} since start)` }),
    table([['time', (r) => when(r.at)], ['from', (r) => r.from], ['to', (r) => r.to ?? 'nothing left'], ['why', (r) => r.code]], f.recent, 'No call has failed over.'),
    h('h2', { text: 'Keys cooling down' }),
    table([['provider', (c) => c.providerId], ['key', (c) => `#${c.keyIndex + 1}`, 'num'], ['until', (c) => when(c.until)], ['failures', (c) => fmt(c.failures), 'num'], ['why', (c) => c.lastCode]],
      f.cooldowns, 'No key is cooling down.'),
  ];
}

export async function showProviders(status) {
  const [{ usage, recentTurns }, totals] = await Promise.all([api('/admin/providers'), api('/usage')]);
  $('providers').replaceChildren(
    table([
      ['provider', (p) => p.id], ['kind', (p) => p.kind], ['model', (p) => p.model], ['context window', (p) => fmt(p.contextWindow), 'num'],
      ['requests', (p) => fmt(p.requests), 'num'], ['retries', (p) => fmt(p.retries), 'num'], ['errors', (p) => fmt(p.errors), 'num'],
      ['tokens', (p) => fmt(p.totalTokens), 'num'], ['last error', (p) => (p.lastError ? `${p.lastError.code} (${p.lastError.modelId}, ${when(p.lastError.at)})` : ''), 'wrap'],
    ], status?.providers ?? []),
    ...failoverParts(status?.failovers),
    h('h2', { text: 'By model' }),
    table([
      ['provider / model', (u) => `${u.providerId} / ${u.modelId}`], ['requests', (u) => fmt(u.requests), 'num'], ['retries', (u) => fmt(u.retries), 'num'],
      ['errors', (u) => fmt(u.errors), 'num'], ['input', (u) => fmt(u.inputTokens), 'num'], ['output', (u) => fmt(u.outputTokens), 'num'],
      ['cache read', (u) => fmt(u.cacheReadTokens), 'num'], ['cache write', (u) => fmt(u.cacheWriteTokens), 'num'],
    ], usage, 'No LLM calls yet.'));
  $('usage').replaceChildren(h('p', { class: 'muted', text: `${fmt(totals.totals.totalTokens)} tokens in ${fmt(totals.totals.llmCalls)} LLM calls since ${when(totals.since)}` }),
    table([['channel', ([c]) => c], ['tokens', ([, t]) => fmt(t.totalTokens), 'num'], ['LLM calls', ([, t]) => fmt(t.llmCalls), 'num']], Object.entries(totals.channels)));
  $('recent-calls').replaceChildren(table([
    ['time', (r) => new Date(r.timestamp).toLocaleString()], ['session', (r) => sessionLink(r.sessionKey)], ['kind', (r) => r.kind], ['model', (r) => r.modelId],
    ['input', (r) => fmt(r.inputTokens) + (r.isEstimated ? '*' : ''), 'num'], ['output', (r) => fmt(r.outputTokens), 'num'],
    ['cache read', (r) => fmt(r.cacheReadTokens), 'num'], ['cache write', (r) => fmt(r.cacheWriteTokens), 'num'],
    ['tools called', (r) => (r.toolCalls ?? []).join(', ')], ['correlation id', (r) => h('span', { class: 'mono', text: r.correlationId })],
  ], recentTurns.slice(0, 50), 'No LLM calls yet.'));
}

/** Pending requests (approve) and paired people (revoke), from `GET /admin/pairing` or the live stream. */
export function renderPairing(pairing) {
  $('pairing-badge').hidden = pairing.pending.length === 0;
  $('pairing-badge').textContent = String(pairing.pending.length);
  $('pairing-warning').hidden = !pairing.warning;
  $('pairing-warning').textContent = pairing.warning ?? '';
  const reload = async () => renderPairing(await api('/admin/pairing'));
  const button = (label, cls, question, run) => {
    const b = h('button', { type: 'button', class: `${cls} small`, text: label });
    b.addEventListener('click', () => act(b, question, async () => { const message = await run(); void reload(); return message; }));
    return b;
  };
  const who = (p) => `${p.name ?? p.peerId} (${p.channel} ${p.peerId})`;
  $('pairing-pending').replaceChildren(table([
    ['channel', (p) => `${p.channel}/${p.accountId}`], ['peer', (p) => p.peerId], ['name', (p) => p.name ?? ''], ['code', (p) => h('span', { class: 'mono', text: p.code })],
    ['asked', (p) => when(p.createdAt)], ['expires', (p) => when(p.expiresAt)],
    ['', (p) => button('Approve…', '', { title: 'Approve this person?', text: `${who(p)} can then talk to the agent.`, ok: 'Approve' }, async () => {
      const r = await api('/admin/pairing/approve', { method: 'POST', body: { channel: p.channel, code: p.code } });
      return `Approved ${who(r.peer)}.${r.warning ? ` ${r.warning}` : ''}`;
    })],
  ], pairing.pending, 'No one is waiting.'));
  $('pairing-paired').replaceChildren(table([
    ['channel', (p) => p.channel], ['peer', (p) => p.peerId], ['name', (p) => p.name ?? ''], ['approved', (p) => when(p.approvedAt)],
    ['', (p) => button('Revoke…', 'danger', { title: 'Revoke this person?', text: `${who(p)} gets a new pairing code the next time they write.`, ok: 'Revoke' }, async () => {
      const r = await api('/admin/pairing/revoke', { method: 'POST', body: { channel: p.channel, peerId: p.peerId } });
      return r.revoked ? `Revoked ${who(p)}.` : 'They were not paired.';
    })],
  ], pairing.paired, 'No one is paired.'));
}
