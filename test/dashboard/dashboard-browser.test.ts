import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ALICE, dm } from '../channels/telegram/updates.ts';
import { CHROMIUM, hasChromium, NARROW, openPage, shot, startWorld, TOKEN, WIDE, type DashboardWorld, type OpenPage, type StorageState } from './browser-harness.ts';

if (!hasChromium) console.log(`dashboard browser tests skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);


/** Waits for a value in the page (rendering and live updates take a moment on a busy machine). */
const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000 });
type Entry = { sessionId: string; tokens: { input: number; output: number; cacheRead: number; cacheWrite: number }; totalTokens: number };

describe.skipIf(!hasChromium)('the dashboard in Chromium', { timeout: 60_000 }, () => {
  let world: DashboardWorld;
  let signedIn: StorageState;
  let open: OpenPage[] = [];
  /** Console errors a test expects (a refused sign-in, a stream cut by a restart); everything else fails it. */
  let expected: RegExp[] = [];

  const page = async (hash: string, viewport = WIDE) => {
    const p = await openPage(world, `${world.gw.url}/${hash}`, viewport, signedIn);
    open.push(p);
    await p.page.locator('#live.on').waitFor();
    return p.page;
  };
  const webchat = (user: string, text: string) => world.api<{ sessionKey: string; reply: string }>('/webchat/messages', { body: { user, text } });
  const cards = (p: OpenPage['page'], scope: string) => p.locator(`${scope} [data-card] .value`).allTextContents();
  const cardsOf = (e: Entry) => [e.tokens.input, e.tokens.output, e.tokens.cacheRead, e.tokens.cacheWrite, e.totalTokens].map((n) => n.toLocaleString('en-US'));
  const entry = (key: string) => world.api<Entry>(`/admin/sessions/${encodeURIComponent(key)}`);

  beforeAll(async () => {
    world = await startWorld();
    signedIn = await world.signIn();
  }, 60_000);
  afterAll(async () => { await world?.close(); });
  afterEach(async () => {
    const errors = open.flatMap((p) => p.errors).filter((e) => !expected.some((x) => x.test(e)));
    await Promise.all(open.map((p) => p.context.close()));
    open = [];
    expected = [];
    expect(errors).toEqual([]);
  });

  it('signs in with the token (a wrong one is refused), and signs out', async () => {
    const first = await openPage(world, `${world.gw.url}/`, NARROW);
    open.push(first);
    const { page: p } = first;
    expect(await p.content()).not.toContain(TOKEN);
    await shot(p, 'sign-in-380');
    await p.getByLabel('Gateway token').fill('not-the-token');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await poll(() => p.getByRole('alert').textContent()).toContain('Wrong token');
    await p.getByLabel('Gateway token').fill(TOKEN);
    await p.keyboard.press('Enter');
    await p.locator('#live.on').waitFor();
    signedIn = await first.context.storageState();
    const cookie = signedIn.cookies.find((c) => c.name === 'switchboard_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    // The bearer header still works for programs; the cookie is not readable by scripts.
    expect(await p.evaluate(() => document.cookie)).toBe('');

    const other = await page('#/sessions');
    await other.getByRole('button', { name: 'Sign out' }).click();
    await other.getByLabel('Gateway token').waitFor();
    const stale = await fetch(`${world.gw.url}/status`, { headers: { cookie: `switchboard_session=${cookie.value}` } });
    expect(stale.status).toBe(401);
    // Sign in again for the other tests.
    await other.getByLabel('Gateway token').fill(TOKEN);
    await other.getByRole('button', { name: 'Sign in' }).click();
    await other.locator('#live.on').waitFor();
    signedIn = await other.context().storageState();
  });

  it('web chat: the answer streams in and its markdown is rendered safely; the token cards follow', async () => {
    const p = await page('#/chat');
    world.llm.reply = (text) => text.includes('[slow]')
      ? 'Here is **bold** and a list:\n\n- one\n- two\n\nand `code` <img src=x onerror="window.hacked=1"> the end.'
      : `echo: ${text}`;
    const held = world.llm.held();
    await p.getByLabel('Message').fill('[slow] hello from the page');
    await p.keyboard.press('Enter');
    await held;
    const answer = p.locator('#chat-log li[data-role="assistant"]').last();
    await poll(() => answer.textContent()).toContain('Here is bold');
    expect(await answer.textContent()).not.toContain('the end');
    expect(await answer.getAttribute('aria-busy')).toBe('true');
    world.llm.release();
    await poll(() => answer.textContent()).toContain('the end.');
    expect(await answer.locator('strong').textContent()).toBe('bold');
    expect(await answer.locator('li').allTextContents()).toEqual(['one', 'two']);
    expect(await answer.locator('img').count()).toBe(0);
    expect(await answer.textContent()).toContain('<img src=x');
    expect(await p.evaluate(() => (window as { hacked?: number }).hacked)).toBeUndefined();
    const key = 'agent:main:webchat:direct:web';
    expect(await p.locator('#chat-key').textContent()).toBe(key);
    await poll(async () => cards(p, '#chat-cards')).toEqual(cardsOf(await entry(key)));
    await shot(p, 'chat-1440');
    await p.setViewportSize(NARROW);
    await shot(p, 'chat-380');
  });

  it('a session started by another client appears without reload; its token cards equal the API after each turn', async () => {
    const p = await page('#/sessions');
    await p.evaluate(() => { (window as { marker?: number }).marker = 1; });
    const key = (await webchat('carol', 'hello from curl')).sessionKey;
    expect(key).toBe('agent:main:webchat:direct:carol');
    const link = p.locator(`#session-list a[data-key="${key}"]`);
    await link.waitFor();
    // Keyboard: focus the session and open it with Enter.
    await link.focus();
    await p.keyboard.press('Enter');
    await p.locator('#session-detail h2', { hasText: key }).waitFor();
    let before = await cards(p, '#session-detail');
    expect(before).toEqual(cardsOf(await entry(key)));
    for (const text of ['second turn', 'third turn']) {
      await webchat('carol', text);
      const after = cardsOf(await entry(key));
      expect(after).not.toEqual(before);
      await poll(() => cards(p, '#session-detail')).toEqual(after);
      await poll(() => p.locator('#session-detail .log li[data-role="assistant"]').last().textContent()).toContain(`echo: ${text}`);
      before = after;
    }
    expect(await p.locator('#session-detail svg[role="img"] g.bar').count()).toBe(3);
    expect(await p.locator('#session-detail svg text', { hasText: 'tokens' }).count()).toBe(1);
    expect(await p.evaluate(() => (window as { marker?: number }).marker)).toBe(1);
    await p.locator('#f-search').fill('carol');
    await poll(() => p.locator('#session-list a').count()).toBe(1);
    await shot(p, 'session-detail-1440');
    const narrow = await page(`#/sessions/${encodeURIComponent(key)}`, NARROW);
    await narrow.locator('#session-detail [data-card]').first().waitFor();
    expect(await narrow.locator('#session-list').isVisible()).toBe(false);
    await shot(narrow, 'session-detail-380');
    await narrow.getByRole('link', { name: '← All sessions' }).click();
    await narrow.locator(`#session-list a[data-key="${key}"]`).waitFor();
    await shot(narrow, 'sessions-380');
  });

  it('resets a session after confirmation and shows the new session id', async () => {
    const key = (await webchat('dora', 'hi')).sessionKey;
    const old = (await entry(key)).sessionId;
    const p = await page(`#/sessions/${encodeURIComponent(key)}`);
    const id = p.locator('#session-detail [data-field="sessionId"]');
    await poll(() => id.textContent()).toBe(old);
    await p.getByRole('button', { name: 'Reset…' }).click();
    await p.keyboard.press('Escape'); // cancelled: nothing happens
    expect((await entry(key)).sessionId).toBe(old);
    await p.getByRole('button', { name: 'Reset…' }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Reset' }).click();
    await poll(() => id.textContent()).not.toBe(old);
    expect(await id.textContent()).toBe((await entry(key)).sessionId);
    await poll(() => p.locator('#toast').textContent()).toContain(`new session id ${await id.textContent()}`);
  });

  it('lists a running turn under Runs and stops it after confirmation', async () => {
    const held = world.llm.held();
    const turn = webchat('fred', '[slow] a long job').catch((e: unknown) => e);
    await held;
    const p = await page('#/runs');
    const row = p.locator('#runs tr', { hasText: 'agent:main:webchat:direct:fred' });
    await row.waitFor();
    await poll(() => p.locator('#runs-badge').textContent()).toBe('1');
    await shot(p, 'runs-running-1440');
    await row.getByRole('button', { name: 'Stop…' }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Stop' }).click();
    await poll(() => p.locator('#toast').textContent()).toContain('Stopped the running turn');
    await p.locator('#runs', { hasText: 'No run is running or continuing.' }).waitFor();
    world.llm.release();
    await turn;
  });

  it('approves a pairing request from the page and the sender gets through', async () => {
    const p = await page('#/pairing');
    world.telegram.pushUpdate(dm('hi, who are you?'));
    const prompt = await world.telegram.waitFor('sendMessage', (c) => c.body.chat_id === ALICE.id);
    const code = /pairing code: ([A-Z0-9]{8})/.exec(prompt.body.text)?.[1];
    expect(code).toBeDefined();
    const row = p.locator('#pairing-pending tr', { hasText: code! });
    await row.waitFor(); // pushed live: no reload
    expect(await p.locator('#pairing-badge').textContent()).toBe('1');
    await shot(p, 'pairing-1440');
    await row.getByRole('button', { name: 'Approve…' }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Approve' }).click();
    await p.locator('#pairing-paired tr', { hasText: '42' }).waitFor();
    world.telegram.pushUpdate(dm('hello again'));
    const answer = await world.telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('echo: hello again'));
    expect(answer.body.chat_id).toBe(ALICE.id);
    await p.locator('#pairing-paired tr', { hasText: '42' }).getByRole('button', { name: 'Revoke…' }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await p.locator('#pairing-paired', { hasText: 'No one is paired.' }).waitFor();
  });

  it('shows a channel that fails as failed, with the reason, next to the connected ones', async () => {
    const p = await page('#/channels');
    const broken = p.locator('#channel-list li[data-channel="telegram/broken"]');
    await poll(() => broken.getAttribute('data-health')).toBe('failed');
    expect(await broken.locator('.reason').textContent()).toMatch(/401|Unauthorized|refused/i);
    expect(await p.locator('#channel-list li[data-channel="telegram/default"]').getAttribute('data-health')).toBe('connected');
    expect(await p.locator('#channels-badge').textContent()).toBe('1');
    expect(await p.locator('#ready-line').textContent()).toContain('telegram/broken');
    await shot(p, 'channels-1440');
    await p.setViewportSize(NARROW);
    await shot(p, 'channels-380');
    for (const view of ['providers', 'runs']) {
      await p.getByRole('link', { name: new RegExp(`^${view}`, 'i') }).click();
      await p.locator(view === 'runs' ? '#runs > *' : '#providers table').first().waitFor();
      await p.setViewportSize(WIDE);
      await shot(p, `${view}-1440`);
      await p.setViewportSize(NARROW);
      await shot(p, `${view}-380`);
    }
    await p.getByRole('link', { name: /^providers/i }).click();
    expect(await p.locator('#recent-calls tbody tr').count()).toBeGreaterThan(0);
  });

  it('reconnects after a gateway restart and goes on updating', async () => {
    expected = [/ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_INCOMPLETE_CHUNKED_ENCODING/];
    const p = await page('#/sessions');
    await p.evaluate(() => {
      const live = document.getElementById('live')!;
      const seen: string[] = [];
      (window as { liveStates?: string[] }).liveStates = seen;
      new MutationObserver(() => seen.push(live.textContent ?? '')).observe(live, { childList: true, characterData: true, subtree: true });
    });
    await world.restart();
    await poll(() => p.evaluate(() => (window as { liveStates?: string[] }).liveStates!.join(' → '))).toMatch(/reconnecting….*→ live$/);
    const key = (await webchat('erin', 'after the restart')).sessionKey;
    await p.locator(`#session-list a[data-key="${key}"]`).waitFor();
    await shot(p, 'sessions-1440');
  });
});
