import { accessSync, constants, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { planRekey } from '../gateway/rekey.ts';
import { allSessions } from '../sessions/scan.ts';
import type { KeyvSessionStore } from '../sessions/store.ts';
import { openSessionStore } from '../stores.ts';
import { createServer } from 'node:net';
import type { ResolvedConfig } from '../config/resolved.ts';
import { readStateOwner, StateLock } from '../core/state-lock.ts';
import { dmScopeWarning } from '../routing/dm-scope-warning.ts';
import { withPairingAdmin } from './pairing.ts';
import { findCommandTarget, gatewaySessions } from './gateway-client.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import { probeMcpServers } from '../tools/mcp/mcp-probe.ts';
import { checkProviders } from './doctor-providers.ts';
import type { Check } from './doctor-check.ts';
import { probeClusterDatabase } from '../cluster/cluster-probe.ts';
import { isClusterStore } from '../cluster/pg-database.ts';


type Probe = { status?: number; body?: unknown; error?: string };

const PROBE_TIMEOUT_MS = 5000;

/** One HTTP request with a timeout; network failures come back as a short reason (`ECONNREFUSED`, `timed out`). */
async function probe(url: string, init: RequestInit = {}): Promise<Probe> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const text = await response.text();
    let body: unknown = text;
    try { body = JSON.parse(text); } catch { /* not JSON */ }
    return { status: response.status, body };
  } catch (error) {
    const e = error as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return { error: `timed out after ${PROBE_TIMEOUT_MS / 1000} s` };
    return { error: e.cause?.code ?? e.cause?.message ?? e.message };
  }
}

/** Whether the configured port is free, used by this state folder's gateway, or taken by something else. */
async function checkPort(config: ResolvedConfig): Promise<Check> {
  const { host, port } = config.gateway;
  const name = 'port';
  if (port === 0) return { name, ok: true, detail: 'port 0: the system picks a free port at start' };
  const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    const server = createServer();
    server.once('error', (e: NodeJS.ErrnoException) => resolve(e));
    server.listen(port, host, () => server.close(() => resolve(undefined)));
  });
  if (!error) return { name, ok: true, detail: `${host}:${port} is free` };
  if (error.code === 'EADDRINUSE') {
    const owner = (await StateLock.isHeld(config.stateDir)) ? readStateOwner(config.stateDir) : undefined;
    if (owner?.role === 'gateway' && owner.port === port) return { name, ok: true, detail: `${host}:${port} is used by this state folder's gateway (pid ${owner.pid})` };
    const other = await probe(`http://${host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host}:${port}/healthz`);
    const what = (other.body as { ok?: unknown } | undefined)?.ok === true ? 'another Switchboard gateway (with another state folder)' : 'another program';
    return { name, ok: false, detail: `${host}:${port} is taken by ${what}: stop it, or start on another port with --port <n> or SWITCHBOARD_PORT` };
  }
  if (error.code === 'EACCES') return { name, ok: false, detail: `${host}:${port} needs privileges: use a port above 1023 (--port or SWITCHBOARD_PORT)` };
  if (error.code === 'EADDRNOTAVAIL') return { name, ok: false, detail: `${host} is not an address of this machine: set gateway.host (or SWITCHBOARD_HOST) to 127.0.0.1 or 0.0.0.0` };
  return { name, ok: false, detail: `cannot listen on ${host}:${port}: ${error.message}` };
}

/** Socket Mode: does Slack hand out a connection for this app-level token (`apps.connections.open`)? */
async function checkSlackAppToken(name: string, api: string, appToken: string): Promise<Check> {
  const r = await probe(`${api}apps.connections.open`, { method: 'POST', headers: { authorization: `Bearer ${appToken}` } });
  if (r.error) return { name, ok: false, detail: `cannot reach the Slack API at ${api} to check the app token (${r.error}): check the network, or SLACK_API_URL` };
  const body = r.body as { ok?: boolean; error?: string } | undefined;
  if (r.status === 200 && body?.ok) return { name, ok: true, detail: 'app token accepted (Socket Mode can connect)' };
  if (r.status === 429 || body?.error === 'ratelimited') return { name, ok: 'warn', detail: 'apps.connections.open is rate-limited right now (a running gateway may have just connected): could not check SLACK_APP_TOKEN; try again in a minute' };
  if (body?.error) return { name, ok: false, detail: `Slack refused the app token (${body.error}): check SLACK_APP_TOKEN: an app-level token with connections:write (xapp-…, Basic Information → App-Level Tokens), with Socket Mode enabled` };
  return { name, ok: false, detail: `apps.connections.open answered HTTP ${r.status}: try again later` };
}

async function checkChannels(config: ResolvedConfig): Promise<Check[]> {
  const checks: Promise<Check>[] = [];
  for (const t of config.channels.telegram.filter((a) => a.enabled)) {
    const name = `telegram/${t.accountId}`;
    if (!t.botToken) { checks.push(Promise.resolve({ name, ok: false, detail: 'TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in .env' })); continue; }
    const root = t.apiRoot || 'https://api.telegram.org';
    checks.push(probe(`${root}/bot${t.botToken}/getMe`, { method: 'POST' }).then((r): Check => {
      if (r.error) return { name, ok: false, detail: `cannot reach the Bot API at ${root} (${r.error}): check the network, or TELEGRAM_API_ROOT` };
      const username = (r.body as { result?: { username?: string } } | undefined)?.result?.username;
      if (r.status === 200) return { name, ok: true, detail: `token accepted (@${username ?? '?'})` };
      if (r.status === 401 || r.status === 404) return { name, ok: false, detail: `Telegram rejected the token (HTTP ${r.status}): copy it again from @BotFather into TELEGRAM_BOT_TOKEN` };
      return { name, ok: false, detail: `getMe answered HTTP ${r.status}: try again later` };
    }));
  }
  for (const d of config.channels.discord.filter((a) => a.enabled)) {
    const name = `discord/${d.accountId}`;
    if (!d.token) { checks.push(Promise.resolve({ name, ok: false, detail: 'DISCORD_BOT_TOKEN is not set: copy the bot token from the Developer Portal (Bot → Reset Token)' })); continue; }
    const api = d.apiBase || 'https://discord.com/api';
    checks.push(probe(`${api}/v10/users/@me`, { headers: { authorization: `Bot ${d.token}` } }).then((r): Check => {
      if (r.error) return { name, ok: false, detail: `cannot reach the Discord API at ${api} (${r.error}): check the network, or DISCORD_API_BASE` };
      if (r.status === 200) return { name, ok: true, detail: `token accepted (${(r.body as { username?: string }).username ?? '?'})` };
      if (r.status === 401 || r.status === 403) return { name, ok: false, detail: `Discord rejected the token (HTTP ${r.status}): reset it in the Developer Portal (Bot → Reset Token) and update DISCORD_BOT_TOKEN` };
      return { name, ok: false, detail: `users/@me answered HTTP ${r.status}: try again later` };
    }));
  }
  for (const s of config.channels.slack.filter((a) => a.enabled)) {
    const name = `slack/${s.accountId}`;
    if (!s.botToken) { checks.push(Promise.resolve({ name, ok: false, detail: 'SLACK_BOT_TOKEN is not set: install the app and copy its bot token (xoxb-…)' })); continue; }
    if (s.mode === 'socket' && !s.appToken) checks.push(Promise.resolve({ name, ok: false, detail: 'Socket Mode needs SLACK_APP_TOKEN (xapp-… with connections:write)' }));
    if (s.mode === 'http' && !s.signingSecret) checks.push(Promise.resolve({ name, ok: false, detail: 'HTTP mode needs SLACK_SIGNING_SECRET (Basic Information → App Credentials)' }));
    const api = s.apiUrl || 'https://slack.com/api/';
    checks.push(probe(`${api}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${s.botToken}` } }).then((r): Check => {
      if (r.error) return { name, ok: false, detail: `cannot reach the Slack API at ${api} (${r.error}): check the network, or SLACK_API_URL` };
      const body = r.body as { ok?: boolean; error?: string; team?: string } | undefined;
      if (r.status === 200 && body?.ok) return { name, ok: true, detail: `bot token accepted (team ${body.team ?? '?'})` };
      if (body?.error) return { name, ok: false, detail: `Slack refused the bot token (${body.error}): check SLACK_BOT_TOKEN and that the app is installed` };
      return { name, ok: false, detail: `auth.test answered HTTP ${r.status}: try again later` };
    }));
    // auth.test only sees the bot token; in Socket Mode the app token is what opens the connection.
    if (s.mode === 'socket' && s.appToken) checks.push(checkSlackAppToken(name, api, s.appToken));
  }
  return Promise.all(checks);
}

/** SPEC §12: what the next start would re-key, given the current identity links and bindings (read only). */
async function checkRekey(config: ResolvedConfig): Promise<Check> {
  if (!existsSync(path.join(config.stateDir, 'sessions.sqlite')) && config.store.startsWith('sqlite://')) return { name: 're-keying', ok: true, detail: 'no sessions yet' };
  let store: KeyvSessionStore | undefined;
  let lock: StateLock | undefined;
  try {
    // The store belongs to the state folder's owner: read through a running gateway, else open it under the lock.
    const target = await findCommandTarget(config);
    let entries: AsyncIterable<SessionEntry>;
    if (target.kind === 'gateway') {
      entries = gatewaySessions(target.client);
    } else {
      lock = await StateLock.acquire(config.stateDir, { role: 'cli', command: 'switchboard doctor' });
      store = await openSessionStore(config.store);
      entries = allSessions(store);
    }
    const moves = await planRekey(entries, config);
    if (!moves.length) return { name: 're-keying', ok: true, detail: 'every session is under the key identity links and bindings give it' };
    const shown = moves.filter((m) => !m.temporary);
    const list = shown.slice(0, 10).map((m) => `${m.parkedFrom ?? m.from} → ${m.action === 'move' ? m.to : `archived (merged into ${m.to})`}`).join('; ');
    const count = `${shown.length} session${shown.length === 1 ? '' : 's'}`;
    // A cluster re-keys once, at the next replica start, in one transaction under a database lock (cluster-rekey.ts).
    const what = isClusterStore(config.store)
      ? `the next replica to start moves ${count}, once for the cluster (under a database lock; put off while one of them has queued messages or is running)`
      : `the next start moves ${count}`;
    return { name: 're-keying', ok: 'warn', detail: `${what}: ${list}${shown.length > 10 ? '; …' : ''}` };
  } catch (error) {
    return { name: 're-keying', ok: 'warn', detail: `could not read the sessions: ${(error as Error).message}` };
  } finally {
    await store?.close().catch(() => undefined);
    await lock?.release();
  }
}

/**
 * `switchboard doctor`: the config, the state folder and its owner, the port, each provider (does each key
 * answer, are the configured models there; with `completion` a 1-token completion), each channel's token
 * (does it authenticate), and the `dmScope` warning. Every failed check says what to do.
 */
export async function runDoctor(config: ResolvedConfig, out: NodeJS.WritableStream, options: { completion?: boolean } = {}): Promise<boolean> {
  const checks: Check[] = [];
  checks.push({ name: 'config', ok: true, detail: config.configPath ? `valid (${config.configPath})` : 'no file; defaults and environment' });
  try {
    mkdirSync(config.stateDir, { recursive: true });
    accessSync(config.stateDir, constants.W_OK);
    const owner = (await StateLock.isHeld(config.stateDir)) ? readStateOwner(config.stateDir) : undefined;
    const by = owner ? `; in use by ${owner.role === 'gateway' ? `the gateway at ${owner.url ?? '(starting)'}` : `"${owner.command}"`} (pid ${owner.pid})` : '';
    checks.push({ name: 'state folder', ok: true, detail: `${config.stateDir} is writable${by}` });
  } catch (error) {
    checks.push({ name: 'state folder', ok: false, detail: `${config.stateDir}: ${(error as Error).message}; set stateDir (or SWITCHBOARD_STATE_DIR) to a writable folder` });
  }
  const [port, providers, channels, mcp] = await Promise.all([
    checkPort(config),
    checkProviders(config, { completion: options.completion }),
    checkChannels(config),
    probeMcpServers(config),
  ]);
  checks.push(port, ...providers, ...channels);
  if (isClusterStore(config.store)) checks.push({ name: 'cluster database', ...(await probeClusterDatabase(config.store)) });
  for (const server of mcp) {
    checks.push(server.state === 'ready'
      ? { name: `mcp ${server.name}`, ok: true, detail: `${server.transport} server ready with ${server.tools} tool${server.tools === 1 ? '' : 's'}` }
      : { name: `mcp ${server.name}`, ok: false, detail: `${server.error ?? server.state}; check mcp.servers.${server.name} (command and args, or url and headers)` });
  }
  if (!config.gateway.authToken && !/^(127\.|localhost$|::1$)/.test(config.gateway.host)) {
    checks.push({ name: 'gateway', ok: false, detail: `host ${config.gateway.host} is reachable from other machines without gateway.authToken: start will refuse; set SWITCHBOARD_AUTH_TOKEN or bind to 127.0.0.1` });
  } else {
    checks.push({ name: 'gateway', ok: true, detail: `http://${config.gateway.host}:${config.gateway.port}${config.gateway.authToken ? ' (bearer token required)' : ''}` });
  }
  try {
    // The paired peers are the store's (through the gateway when one runs); the policy is this config's.
    const { paired } = await withPairingAdmin(config, 'switchboard doctor', (admin) => admin.list());
    const warning = dmScopeWarning(config, paired);
    checks.push(warning ? { name: 'dm sessions', ok: 'warn', detail: warning } : { name: 'dm sessions', ok: true, detail: `dmScope ${config.session.dmScope}` });
  } catch (error) {
    checks.push({ name: 'dm sessions', ok: 'warn', detail: `could not read the paired peers: ${(error as Error).message}` });
  }
  checks.push(await checkRekey(config));
  for (const c of checks) out.write(`${c.ok === true ? 'ok  ' : c.ok === 'warn' ? 'warn' : 'FAIL'}  ${c.name}: ${c.detail}\n`);
  return checks.every((c) => c.ok !== false);
}
