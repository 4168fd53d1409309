import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { startGatedLlm, type GatedLlm } from './gated-llm.ts';

/** Debian's Chromium; the browser tests skip when it is missing (`.ci/run` installs it). */
export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);
/** Screenshots for people to look at (git-ignored). */
export const SHOTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
export const TOKEN = 'dash-board-token-1234';
export const WIDE = { width: 1440, height: 900 };
export const NARROW = { width: 380, height: 800 };
export type StorageState = Awaited<ReturnType<BrowserContext['storageState']>>;

/** A gateway with a token, the gated LLM, Telegram (`default` on the fake, `broken` with a refused token). */
export interface DashboardWorld {
  gw: RunningGateway;
  llm: GatedLlm;
  telegram: FakeTelegram;
  browser: Browser;
  /** Starts the gateway again on the same port and state folder. */
  restart(): Promise<void>;
  /** A signed-in browser state (the session cookie), as the sign-in page would get it. */
  signIn(): Promise<StorageState>;
  /** Calls the API with the bearer token. */
  api<T = any>(route: string, init?: { method?: string; body?: unknown; accept?: string }): Promise<T>;
  close(): Promise<void>;
}

/** Starts the world; `extra` replaces top-level config sections (e.g. `agents`, `mcp`, `session`). */
export async function startWorld(extra: Record<string, unknown> = {}): Promise<DashboardWorld> {
  const [llm, telegram] = await Promise.all([startGatedLlm(), startFakeTelegram()]);
  const tmp = tempDir('switchboard-dashboard-');
  const env = { OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'sk-test', OPENAI_MODEL: 'gpt-test', TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
  const config = (port = 0) => ({
    gateway: { port, authToken: TOKEN },
    session: { dmScope: 'per-channel-peer' },
    providers: { default: { maxRetries: 0 } },
    channels: { telegram: { dmPolicy: 'pairing', accounts: { broken: { botToken: '999:refused-token' } } } },
    ...extra,
  });
  const [gw, browser] = await Promise.all([
    startTestGateway({ dir: tmp.dir, env, config: config() }),
    chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    }),
  ]);
  mkdirSync(SHOTS, { recursive: true });
  const world: DashboardWorld = {
    gw, llm, telegram, browser,
    restart: async () => {
      const port = world.gw.port!;
      await world.gw.stop();
      world.gw = await startTestGateway({ dir: tmp.dir, env, config: config(port) });
    },
    signIn: async () => {
      const response = await fetch(`${world.gw.url}/dashboard/sign-in`, { method: 'POST', headers: { origin: world.gw.url!, 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
      const value = /switchboard_session=([^;]+)/.exec(response.headers.get('set-cookie') ?? '')?.[1];
      if (!value) throw new Error(`sign-in failed: HTTP ${response.status}`);
      return { cookies: [{ name: 'switchboard_session', value, domain: '127.0.0.1', path: '/', expires: -1, httpOnly: true, secure: false, sameSite: 'Strict' }], origins: [] };
    },
    api: async (route, init = {}) => {
      const response = await fetch(`${world.gw.url}${route}`, {
        method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...(init.accept ? { accept: init.accept } : {}) },
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      });
      if (!response.ok) throw new Error(`${route}: HTTP ${response.status} ${await response.text()}`);
      return init.accept === 'text/event-stream' ? (await response.text()) as never : response.json();
    },
    close: async () => {
      await browser.close();
      await world.gw.stop();
      await Promise.all([llm.close(), telegram.close()]);
      tmp.remove();
    },
  };
  return world;
}

/** A page and the console errors it logged (errors expected by a test are filtered by it). */
export interface OpenPage {
  context: BrowserContext;
  page: Page;
  errors: string[];
}

/** A new browser context at a viewport size, optionally with a signed-in session cookie, on `url`. */
export async function openPage(world: DashboardWorld, url: string, viewport = WIDE, signedIn?: StorageState): Promise<OpenPage> {
  const context = await world.browser.newContext({ viewport, ...(signedIn ? { storageState: signedIn } : {}) });
  const page = await context.newPage();
  const errors: string[] = [];
  // With the URL it came from: "Failed to load resource" alone does not say which request failed.
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`${m.text()} (${m.location().url})`); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.stack ?? e.message}`));
  await page.goto(url);
  return { context, page, errors };
}

/** Writes a screenshot of the whole page to `screenshots/<name>.png`. */
export async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}
