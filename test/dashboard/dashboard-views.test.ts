import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, hasChromium, NARROW, openPage, shot, startWorld, TOKEN, WIDE, type DashboardWorld, type OpenPage, type StorageState } from './browser-harness.ts';

if (!hasChromium) console.log(`dashboard view tests skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000 });
type Entry = { sessionId: string; runState: string; compactionCount: number; tokenBudget?: { used: number; budget: number } };

/** An answer with a table whose columns are aligned (markdown-it would write style="text-align:…"). */
const TABLE = [
  'The plan:', '',
  '| step | owner | when |',
  '|:-----|:-----:|-----:|',
  '| write the very long description of the first step of the plan, which wraps on a phone | ivy | tomorrow morning at nine |',
  '| review it | sam | friday |',
].join('\n');

/**
 * The dashboard's views beyond the main flows: tool calls and aligned tables in the history, the session
 * budget, compact (by keyboard, with confirmation), the list filters, MCP servers, readiness, and every view at
 * 380 px without sideways scrolling.
 */
describe.skipIf(!hasChromium)('the dashboard views in Chromium', { timeout: 60_000 }, () => {
  let world: DashboardWorld;
  let signedIn: StorageState;
  let open: OpenPage[] = [];

  const page = async (hash: string, viewport = WIDE) => {
    const p = await openPage(world, `${world.gw.url}/${hash}`, viewport, signedIn);
    open.push(p);
    await p.page.locator('#live.on').waitFor();
    return p.page;
  };
  const webchat = (user: string, text: string) => world.api<{ sessionKey: string; reply: string }>('/webchat/messages', { body: { user, text } });
  const entry = (key: string) => world.api<Entry>(`/admin/sessions/${encodeURIComponent(key)}`);

  beforeAll(async () => {
    world = await startWorld({
      session: { dmScope: 'per-channel-peer', tokenBudget: 1_000_000 },
      agents: {
        defaults: { compaction: { enabled: true, reserveTokens: 16384, keepRecentTokens: 10, memoryFlush: false } },
        list: [{ id: 'main' }, { id: 'helper', tokenBudget: 50 }],
      },
      mcp: { servers: { broken: { command: '/nonexistent/switchboard-test-mcp-server' } } },
    });
    world.llm.reply = (text) => (text.includes('[table]') ? TABLE : `echo: ${text}`);
    signedIn = await world.signIn();
  }, 60_000);
  afterAll(async () => { await world?.close(); });
  afterEach(async () => {
    const errors = open.flatMap((p) => p.errors);
    await Promise.all(open.map((p) => p.context.close()));
    open = [];
    // No exemptions here: a CSP refusal (an inline style) or a failed request is a console error.
    expect(errors).toEqual([]);
  });

  it('shows tool calls and an aligned table in the history, the budget used / budget, and compacts by keyboard after confirmation', async () => {
    const key = (await webchat('ivy', '[tool] remember that I like short answers')).sessionKey;
    expect(key).toBe('agent:main:webchat:direct:ivy');
    await webchat('ivy', '[table] show the plan');
    const p = await page(`#/sessions/${encodeURIComponent(key)}`);
    const history = p.locator('#session-detail .log');
    const call = history.locator('li[data-role="tool-call"]');
    await call.waitFor();
    expect(await call.locator('summary').textContent()).toBe('→ memory_write');
    await call.locator('summary').click();
    expect(await call.locator('pre').textContent()).toBe('{\n  "note": "The owner likes short answers."\n}');
    expect(await history.locator('li[data-role="tool-result"] summary').textContent()).toMatch(/^← memory_write result \(\d+ characters\)$/);

    const owner = history.locator('th', { hasText: 'owner' });
    expect(await owner.getAttribute('class')).toBe('align-center');
    expect(await owner.evaluate((el) => getComputedStyle(el).textAlign)).toBe('center');
    expect(await history.locator('td', { hasText: 'friday' }).evaluate((el) => getComputedStyle(el).textAlign)).toBe('right');
    expect(await history.locator('th[style], td[style]').count()).toBe(0);

    const budget = (await entry(key)).tokenBudget!;
    expect(budget.budget).toBe(1_000_000);
    expect(budget.used).toBeGreaterThan(0);
    expect(await p.locator('#session-detail [data-field="budget"]').textContent()).toBe(`${budget.used.toLocaleString('en-US')} / 1,000,000`);

    // Keyboard only: Enter opens the confirmation, Escape cancels it; Tab to the confirm button and Enter compacts.
    const compact = p.locator('#session-detail button[data-action="compact"]');
    await compact.focus();
    await p.keyboard.press('Enter');
    await p.getByRole('dialog').waitFor();
    expect(await p.locator('#confirm-title').textContent()).toBe('Compact this session?');
    await p.keyboard.press('Escape');
    await p.getByRole('dialog').waitFor({ state: 'hidden' });
    expect((await entry(key)).compactionCount).toBe(0);
    await compact.focus();
    await p.keyboard.press('Enter');
    await p.getByRole('dialog').waitFor();
    await p.keyboard.press('Tab');
    expect(await p.evaluate(() => document.activeElement?.id)).toBe('confirm-ok');
    await p.keyboard.press('Enter');
    await poll(() => p.locator('#toast').textContent()).toMatch(/^Compacted: [\d,]+ → [\d,]+ tokens$/);
    expect((await entry(key)).compactionCount).toBe(1);
    await poll(() => p.locator('#session-detail [data-field="compactions"]').textContent()).toBe('1');
    await history.locator('li.notice summary', { hasText: 'earlier messages summarized' }).waitFor();
  });

  it('filters the sessions list by agent, channel and run state', async () => {
    const gina = (await webchat('gina', 'hello')).sessionKey;
    // The helper agent's budget (50 tokens) is smaller than any prompt: its turn is refused, runState budget-limited.
    await fetch(`${world.gw.url}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'x-session-key': 'hank' },
      body: JSON.stringify({ model: 'helper', messages: [{ role: 'user', content: 'hello' }] }),
    });
    const hank = 'agent:helper:api:direct:hank';
    await poll(async () => (await entry(hank)).runState).toBe('budget-limited');
    const p = await page('#/sessions');
    const keys = () => p.locator('#session-list a').evaluateAll((links) => links.map((a) => (a as HTMLElement).dataset.key));
    await p.locator(`#session-list a[data-key="${gina}"]`).waitFor();
    await p.locator('#f-agent').selectOption('helper');
    await poll(keys).toEqual([hank]);
    await p.locator('#f-agent').selectOption('');
    await p.locator('#f-channel').selectOption('webchat');
    await poll(async () => (await keys()).includes(gina) && !(await keys()).includes(hank)).toBe(true);
    expect((await keys()).every((k) => k!.startsWith('agent:main:webchat:'))).toBe(true);
    await p.locator('#f-channel').selectOption('');
    await p.locator('#f-run').selectOption('budget-limited');
    await poll(keys).toEqual([hank]);
    expect(await p.locator('#sessions-count').textContent()).toMatch(/^1 session · Σ [\d,]+ tokens$/);
    await p.locator(`#session-list a[data-key="${hank}"]`).click();
    await poll(() => p.locator('#session-detail [data-field="budget"]').textContent()).toMatch(/^[\d,]+ \/ 50$/);
    expect(await p.locator('#session-detail [data-field="runState"]').textContent()).toBe('budget-limited · active');
  });

  it('lists MCP servers with their state on the Channels view, and says what /readyz says', async () => {
    const p = await page('#/channels');
    const server = p.locator('#mcp-list li[data-mcp="broken"]');
    await server.waitFor();
    const status = await world.api<{ mcp: { name: string; transport: string; state: string; tools: number; error?: string }[] }>('/status');
    const reported = status.mcp.find((m) => m.name === 'broken')!;
    expect(reported).toMatchObject({ transport: 'stdio', tools: 0 });
    expect(reported.state).not.toBe('ready');
    await poll(() => server.getAttribute('data-state')).toBe(reported.state);
    expect(await server.locator('.muted').textContent()).toBe('stdio · 0 tools');
    if (reported.error) expect(await server.locator('.error').textContent()).toBe(reported.error);

    const ready = await fetch(`${world.gw.url}/readyz`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ready.status).toBe(503);
    const failing = ((await ready.json()) as { failing: { name: string }[] }).failing.map((f) => f.name);
    expect(failing).toEqual(['telegram/broken']);
    const line = p.locator('#ready-line');
    await poll(() => line.getAttribute('data-ready')).toBe('false');
    expect(await line.textContent()).toMatch(/^Not ready \(GET \/readyz answers 503\): telegram\/broken \(.+\)\.$/);
    expect(await p.locator('#channels-badge').textContent()).toBe('1');
  });

  it('fits every view in 380 px without sideways scrolling, and at 1440 px (screenshots of each)', async () => {
    const key = (await webchat('jo', '[table] the plan again')).sessionKey;
    const views: [string, string][] = [
      ['sessions', '#session-list a'], [`sessions/${encodeURIComponent(key)}`, '#session-detail .log th'], ['chat', '#chat-cards [data-card]'],
      ['channels', '#channel-list li'], ['runs', '#runs > *'], ['providers', '#providers table'], ['pairing', '#pairing-pending > *'],
    ];
    const p = await page('#/sessions', NARROW);
    for (const [hash, ready] of views) {
      const name = hash.startsWith('sessions/') ? 'session-detail-table' : hash;
      await p.evaluate((h) => { location.hash = h; }, `#/${hash}`);
      await p.locator(ready).first().waitFor();
      await p.setViewportSize(NARROW);
      const widths = await p.evaluate(() => ({ page: document.documentElement.scrollWidth, body: document.body.scrollWidth }));
      expect(widths, hash).toEqual({ page: 380, body: 380 });
      await shot(p, `${name}-380`);
      await p.setViewportSize(WIDE);
      expect(await p.evaluate(() => document.documentElement.scrollWidth), hash).toBe(1440);
      await shot(p, `${name}-1440`);
    }
    // The sign-in page, signed out.
    const stranger = await openPage(world, `${world.gw.url}/`, WIDE);
    open.push(stranger);
    await stranger.page.getByLabel('Gateway token').waitFor();
    await shot(stranger.page, 'sign-in-1440');
    await stranger.page.setViewportSize(NARROW);
    expect(await stranger.page.evaluate(() => document.documentElement.scrollWidth)).toBe(380);
  });

  it('signing out in one tab sends the other open tabs of that browser to the sign-in page at once', async () => {
    const own = await world.signIn();
    const first = await openPage(world, `${world.gw.url}/#/sessions`, WIDE, own);
    open.push(first);
    await first.page.locator('#live.on').waitFor();
    const second = await first.context.newPage();
    const secondErrors: string[] = [];
    second.on('console', (m) => { if (m.type() === 'error') secondErrors.push(m.text()); });
    await second.goto(`${world.gw.url}/#/channels`);
    await second.locator('#live.on').waitFor();
    await second.getByRole('button', { name: 'Sign out' }).press('Enter');
    await second.getByLabel('Gateway token').waitFor();
    // The first tab did nothing: its event stream was ended by the sign-out and it went to the sign-in page.
    await first.page.getByLabel('Gateway token').waitFor({ timeout: 5000 });
    expect(secondErrors).toEqual([]);
  });
});
