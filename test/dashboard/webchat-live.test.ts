import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { CHROMIUM, hasChromium, WIDE } from './browser-harness.ts';

const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000 });
const firstUser = (r: RecordedRequest) => userText(r.body.messages.find((m) => m.role === 'user')?.content);
const say = (content: string): FakeReply => ({ content, usage: { prompt_tokens: 30, completion_tokens: 4 } });

/** The web chat page gets replies that come after its request was answered (a sub-agent's result), and checks its name. */
describe.skipIf(!hasChromium)('the web chat page, later replies', { timeout: 60_000 }, () => {
  let fake: FakeOpenAI;
  let gw: RunningGateway;
  let tmp: ReturnType<typeof tempDir>;
  let browser: Browser;
  let contexts: BrowserContext[] = [];
  let errors: string[] = [];
  let releaseChild!: () => void;

  beforeAll(async () => {
    fake = await startFakeOpenAI();
    const child = new Promise<void>((resolve) => { releaseChild = resolve; });
    fake.fallback = async (r) => {
      if (firstUser(r) === 'summarize the plan') {
        await child;
        return say('The plan has three steps.');
      }
      const last = r.body.messages.at(-1)!;
      if (last.role === 'user' && userText(last.content).startsWith('[subagent plan finished]')) return say('Your helper says: **three** steps.');
      if (last.role === 'tool') return say('Started a helper.');
      if (last.role === 'user' && userText(last.content) === 'please delegate') {
        return { toolCalls: [{ id: 'w1', name: 'sessions_spawn', arguments: JSON.stringify({ prompt: 'summarize the plan', label: 'plan' }) }], usage: { prompt_tokens: 30, completion_tokens: 4 } };
      }
      return say(`echo: ${userText(last.content)}`);
    };
    tmp = tempDir('switchboard-webchat-live-');
    [gw, browser] = await Promise.all([
      startTestGateway({
        dir: tmp.dir,
        config: { providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } }, session: { dmScope: 'per-channel-peer', reset: { mode: 'off' } } },
      }),
      chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await gw?.stop();
    await fake?.close();
    tmp?.remove();
  });
  afterEach(async () => {
    await Promise.all(contexts.map((c) => c.close()));
    contexts = [];
    const seen = errors;
    errors = [];
    expect(seen).toEqual([]);
  });

  const open = async (hash: string): Promise<Page> => {
    const context = await browser.newContext({ viewport: WIDE });
    contexts.push(context);
    const page = await context.newPage();
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    await page.goto(`${gw.url}/${hash}`);
    await page.locator('#live.on').waitFor();
    return page;
  };
  const answers = async (p: Page) => (await p.locator('#chat-log li[data-role="assistant"] > div').allTextContents()).map((t) => t.trim());

  it('a sub-agent\'s result answered by the parent appears in the open page as it comes, rendered; a new page shows it in the history', async () => {
    const p = await open('#/chat');
    await poll(() => p.locator('#chat-key').textContent()).toBe('new session: send a message');
    await p.getByLabel('Message').fill('please delegate');
    await p.keyboard.press('Enter');
    await poll(() => answers(p)).toEqual(['Started a helper.']);

    releaseChild();
    await poll(() => answers(p)).toEqual(['Started a helper.', 'Your helper says: three steps.']);
    expect(await p.locator('#chat-log li[data-role="assistant"]').last().locator('strong').textContent()).toBe('three');

    // A page opened afterwards (no session remembered in this browser) loads the session's history.
    const later = await open('#/chat');
    await poll(() => answers(later)).toEqual(['Started a helper.', 'Your helper says: three steps.']);
    expect(await later.locator('#chat-key').textContent()).toBe('agent:main:webchat:direct:web');
  });

  it('a name the server would refuse is marked in the page and nothing is sent', async () => {
    const p = await open('#/chat');
    await poll(() => p.locator('#chat-key').textContent()).toBe('agent:main:webchat:direct:web');
    const before = fake.requests.length;
    await p.getByLabel('You are').fill('two words');
    await p.getByLabel('Message').fill('hello');
    await p.getByLabel('Message').press('Enter');
    await poll(() => p.getByRole('alert').last().textContent()).toBe('"two words" cannot be your name in the chat: use 1-128 letters, digits or . _ @ + - (no spaces).');
    expect(await p.locator('#chat-user:invalid').count()).toBe(1);
    expect(await p.getByLabel('Message').inputValue()).toBe('hello');
    expect(fake.requests.length).toBe(before);

    // A valid name goes through.
    await p.getByLabel('You are').fill('two.words');
    await p.getByLabel('Message').fill('hello');
    await p.getByLabel('Message').press('Enter');
    await poll(() => answers(p)).toEqual(['echo: hello']);
    expect(await p.locator('#chat-user:invalid').count()).toBe(0);
    expect(await p.locator('#chat-key').textContent()).toBe('agent:main:webchat:direct:two.words');
  });
});
