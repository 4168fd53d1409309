import { createHash } from 'node:crypto';
import { streamSSE } from 'hono/streaming';
import sharp from 'sharp';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.ts';
import type { HttpApp } from '../../src/http/app.ts';
import { createDashboardAuth } from '../../src/http/dashboard-auth.ts';
import type { DashboardEvents } from '../../src/http/dashboard-events.ts';
import { mountDashboard } from '../../src/http/dashboard.ts';
import type { TranscriptEntry } from '../../src/sessions/transcript.ts';
import { CHROMIUM, hasChromium, WIDE } from '../dashboard/browser-harness.ts';
import { tempDir } from '../helpers/gateway.ts';
import { startMediaWorld, type MediaWorld } from './media-harness.ts';

const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000 });
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const KEY = 'agent:main:webchat:direct:web';

/**
 * The page's side of media (SPEC §15): the web chat attaches a file and shows the reply's files, the session
 * history shows a user entry's images and lines; every image comes from `/media/<sha256>` through the page's own
 * access. The real dashboard, web chat and media routes; the gateway is the media harness's recording sink,
 * and the admin routes the page reads are a fixed session.
 */
describe.skipIf(!hasChromium)('media in the dashboard and the web chat page', { timeout: 60_000 }, () => {
  let world: MediaWorld;
  let url: string;
  let browser: Browser;
  let tmp: ReturnType<typeof tempDir>;
  let contexts: BrowserContext[] = [];
  let errors: string[] = [];
  let history: TranscriptEntry[] = [];
  let red: Buffer;
  let blue: Buffer;

  beforeAll(async () => {
    tmp = tempDir('switchboard-media-browser-');
    const png = (color: string) => sharp({ create: { width: 24, height: 16, channels: 3, background: color } }).png().toBuffer();
    [red, blue] = [await png('#d00'), await png('#00d')];
    const fixedSession = (app: HttpApp) => {
      const entry = { key: KEY, sessionId: 's1', agentId: 'main', channel: 'webchat', accountId: 'default', chatType: 'direct', tokens: {}, totalTokens: 0, messageCount: 2, runState: 'idle', updatedAt: Date.now() };
      app.get('/admin/sessions', (c) => c.json({ sessions: [entry] }));
      app.get('/admin/sessions/:key', (c) => c.json(entry));
      app.get('/admin/sessions/:key/history', (c) => c.json({ sessionKey: KEY, sessionId: 's1', entries: history }));
      app.get('/admin/sessions/:key/timeline', (c) => c.json({ sessionKey: KEY, sessionId: 's1', turns: [] }));
    };
    // The dashboard's live stream: a hello, then nothing.
    const live = {
      mount: (app: HttpApp) => app.get('/dashboard/events', (c) => streamSSE(c, async (stream) => {
        await stream.writeSSE({ event: 'hello', data: JSON.stringify({ version: 'test', startedAt: 1 }) });
        await new Promise<void>((resolve) => stream.onAbort(resolve));
      })),
      endSession: () => undefined,
    } as unknown as DashboardEvents;
    world = await startMediaWorld({
      authToken: '', maxBytes: 256 * 1024,
      mounts: [fixedSession, mountDashboard({ auth: createDashboardAuth({ token: '', stateDir: tmp.dir, clock: systemClock }), live })],
    });
    [url, browser] = await Promise.all([
      world.listen(),
      chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await world?.close();
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
    page.on('console', (m) => { if (m.type() === 'error') errors.push(`${m.text()} (${m.location().url})`); });
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    await page.goto(`${url}/${hash}`);
    await page.locator('#live.on').waitFor();
    return page;
  };
  /** Whether an image element finished loading with pixels (so its URL was served to the page). */
  const loaded = (page: Page, selector: string) => page.locator(selector).evaluateAll((imgs) => imgs.map((i) => (i as HTMLImageElement).complete && (i as HTMLImageElement).naturalWidth));

  it('a file attached in the web chat reaches the gateway stored; the reply\'s image shows as a thumbnail, its PDF as a link', async () => {
    const pdf = await world.store.put(Buffer.from('%PDF-1.4 report'), { mime: 'application/pdf', maxBytes: 1000 });
    const chart = await world.store.put(blue, { mime: 'image/png', maxBytes: 100_000 });
    world.reply = () => [{ text: 'Here is the **chart**.', files: [
      { path: '/x', name: 'chart.png', mime: 'image/png', size: blue.length, sha256: chart.sha256 },
      { path: '/y', name: 'report.pdf', mime: 'application/pdf', size: 15, sha256: pdf.sha256 },
    ] }];
    const page = await open('#/chat');
    await page.locator('#chat-files').setInputFiles({ name: 'red.png', mimeType: 'image/png', buffer: red });
    await poll(() => page.locator('[data-role="pending-file"]').allTextContents()).toEqual(['red.png×']);
    await page.getByLabel('Message').fill('what color?');
    await page.getByLabel('Message').press('Enter');

    const answer = page.locator('#chat-log li[data-role="assistant"]').last();
    await poll(() => answer.locator('.md').textContent()).toBe('Here is the chart.\n');
    expect(world.received.at(-1)!.text).toBe('what color?');
    expect(world.received.at(-1)!.attachments).toMatchObject([{ type: 'image', sha256: sha(red), name: 'red.png', mimeType: 'image/png', size: red.length }]);
    expect(await page.locator('[data-role="pending-file"]').count()).toBe(0);
    // The user's own image, and the reply's: a thumbnail served by /media, linking to it; the PDF a download link.
    expect(await page.locator('#chat-log li[data-role="user"] img.thumb').getAttribute('alt')).toBe('red.png');
    expect(await answer.locator('img.thumb').getAttribute('src')).toBe(`/media/${chart.sha256}?name=chart.png`);
    await poll(() => loaded(page, '#chat-log li[data-role="assistant"] img.thumb')).toEqual([24]);
    const link = answer.locator('a[download]');
    expect(await link.getAttribute('href')).toBe(`/media/${pdf.sha256}?name=report.pdf`);
    expect(await link.textContent()).toBe('📎 report.pdf (1 KB)');
  });

  it('a file pasted into the message box is attached; a refused upload keeps it for the next try', async () => {
    const page = await open('#/chat');
    await page.getByLabel('Message').focus();
    await page.evaluate(() => {
      const data = new DataTransfer();
      data.items.add(new File([new Uint8Array(300 * 1024)], 'huge.bin', { type: 'application/octet-stream' }));
      document.getElementById('chat-text')!.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
    });
    await poll(() => page.locator('[data-role="pending-file"]').allTextContents()).toEqual(['huge.bin×']);
    const before = world.received.length;
    await page.getByLabel('Message').press('Enter');
    await poll(() => page.locator('#chat-log li.error').last().textContent()).toContain('larger than media.maxBytes');
    expect(world.received.length).toBe(before);
    expect(await page.locator('[data-role="pending-file"]').allTextContents()).toEqual(['huge.bin×']);
    // The browser logs the refused request itself.
    errors = errors.filter((e) => !e.includes('413'));
  });

  it('the session history shows a user entry\'s images from /media and a line for its other media', async () => {
    const original = await world.store.put(red, { mime: 'image/png', maxBytes: 100_000 });
    const small = await world.store.put(blue, { mime: 'image/png', maxBytes: 100_000 });
    history = [
      { type: 'message', id: 'u1', role: 'user', content: 'two files', at: new Date().toISOString(), media: [
        { kind: 'image', name: 'photo.png', mime: 'image/png', size: red.length, sha256: original.sha256, modelSha256: small.sha256, as: 'image', line: '[image: image/png 24×16]' },
        { kind: 'document', name: 'notes.pdf', mime: 'application/pdf', size: 2048, as: 'line', line: '[file too large: notes.pdf, 2 KB]', problem: 'too_large' },
      ] },
      { type: 'message', id: 'a1', role: 'assistant', content: 'Seen.', at: new Date().toISOString() },
    ] as unknown as TranscriptEntry[];
    const page = await open(`#/sessions/${encodeURIComponent(KEY)}`);
    const user = page.locator('#session-detail li[data-role="user"]');
    await poll(() => user.locator('img.thumb').getAttribute('src')).toBe(`/media/${small.sha256}?name=photo.png`);
    expect(await user.locator('a:has(img.thumb)').getAttribute('href')).toBe(`/media/${original.sha256}?name=photo.png`);
    await poll(() => loaded(page, '#session-detail img.thumb')).toEqual([24]);
    expect(await user.locator('[data-role="media-line"]').allTextContents()).toEqual(['[file too large: notes.pdf, 2 KB]']);
  });
});
