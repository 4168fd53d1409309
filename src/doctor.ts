import { accessSync, constants, mkdirSync } from 'node:fs';
import type { ResolvedConfig } from './config/resolved.ts';

type Check = { name: string; ok: boolean | 'warn'; detail: string };

async function reachable(url: string, init: RequestInit = {}): Promise<{ ok: boolean; status?: number; error?: string }> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
    return { ok: response.status < 500, status: response.status };
  } catch (error) {
    return { ok: false, error: (error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message };
  }
}

/** `switchboard doctor`: config, secrets present, state folder writable, provider and channels reachable. */
export async function runDoctor(config: ResolvedConfig, out: NodeJS.WritableStream): Promise<boolean> {
  const checks: Check[] = [];
  checks.push({ name: 'config', ok: true, detail: config.configPath ? `valid (${config.configPath})` : 'no file; defaults and environment' });
  try {
    mkdirSync(config.stateDir, { recursive: true });
    accessSync(config.stateDir, constants.W_OK);
    checks.push({ name: 'state folder', ok: true, detail: `${config.stateDir} is writable` });
  } catch (error) {
    checks.push({ name: 'state folder', ok: false, detail: `${config.stateDir}: ${(error as Error).message}` });
  }
  for (const p of Object.values(config.providers)) {
    if (p.kind === 'offline') {
      checks.push({ name: `provider ${p.id}`, ok: 'warn', detail: 'offline (no OPENAI_API_KEY or OPENAI_BASE_URL): replies are echoes' });
      continue;
    }
    const base = (p.baseUrl || 'https://api.openai.com/v1').replace(/\/+$/, '');
    const r = await reachable(`${base}/models`, { headers: p.apiKey ? { authorization: `Bearer ${p.apiKey}` } : {} });
    const auth = r.status === 401 || r.status === 403;
    checks.push({ name: `provider ${p.id}`, ok: r.ok && !auth, detail: r.error ? `${base} unreachable: ${r.error}` : auth ? `${base} refused the API key (HTTP ${r.status})` : `${base} answered HTTP ${r.status}; model ${p.model}` });
  }
  for (const t of config.channels.telegram.filter((a) => a.enabled)) {
    if (!t.botToken) { checks.push({ name: `telegram/${t.accountId}`, ok: false, detail: 'TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather' }); continue; }
    const r = await reachable(`${t.apiRoot || 'https://api.telegram.org'}/bot${t.botToken}/getMe`, { method: 'POST' });
    checks.push({ name: `telegram/${t.accountId}`, ok: r.ok && r.status === 200, detail: r.error ? `Bot API unreachable: ${r.error}` : r.status === 200 ? 'token accepted' : `getMe answered HTTP ${r.status} (wrong token?)` });
  }
  for (const d of config.channels.discord.filter((a) => a.enabled)) {
    if (!d.token) { checks.push({ name: `discord/${d.accountId}`, ok: false, detail: 'DISCORD_BOT_TOKEN is not set' }); continue; }
    const r = await reachable(`${d.apiBase || 'https://discord.com/api'}/v10/users/@me`, { headers: { authorization: `Bot ${d.token}` } });
    checks.push({ name: `discord/${d.accountId}`, ok: r.ok && r.status === 200, detail: r.error ? `API unreachable: ${r.error}` : r.status === 200 ? 'token accepted' : `users/@me answered HTTP ${r.status} (wrong token?)` });
  }
  for (const s of config.channels.slack.filter((a) => a.enabled)) {
    if (!s.botToken) { checks.push({ name: `slack/${s.accountId}`, ok: false, detail: 'SLACK_BOT_TOKEN is not set' }); continue; }
    if (s.mode === 'socket' && !s.appToken) checks.push({ name: `slack/${s.accountId}`, ok: false, detail: 'Socket Mode needs SLACK_APP_TOKEN (xapp-...)' });
    if (s.mode === 'http' && !s.signingSecret) checks.push({ name: `slack/${s.accountId}`, ok: false, detail: 'HTTP mode needs SLACK_SIGNING_SECRET' });
    const r = await reachable(`${s.apiUrl || 'https://slack.com/api/'}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${s.botToken}` } });
    checks.push({ name: `slack/${s.accountId}`, ok: r.ok && r.status === 200, detail: r.error ? `Web API unreachable: ${r.error}` : `auth.test answered HTTP ${r.status}` });
  }
  if (!config.gateway.authToken && !/^(127\.|localhost|::1)/.test(config.gateway.host)) {
    checks.push({ name: 'gateway', ok: false, detail: `host ${config.gateway.host} without gateway.authToken: start will refuse` });
  } else {
    checks.push({ name: 'gateway', ok: true, detail: `http://${config.gateway.host}:${config.gateway.port}${config.gateway.authToken ? ' (bearer token required)' : ''}` });
  }
  for (const c of checks) out.write(`${c.ok === true ? 'ok  ' : c.ok === 'warn' ? 'warn' : 'FAIL'}  ${c.name}: ${c.detail}\n`);
  return checks.every((c) => c.ok !== false);
}
