import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import { lastUser } from '../fakes/fake-openai.ts';
import { isWebchatChannel, type WebchatPush } from '../../channels/webchat/index.ts';
import { useFakeOpenAI, useTempDir } from '../helpers/fixtures.ts';
import { startTestGateway } from '../helpers/gateway.ts';

/** The web chat and the OpenAI-compatible API with media, through a whole gateway (SPEC §15). */
describe('media over HTTP, end to end', () => {
  const tmp = useTempDir('switchboard-media-http-');
  const openai = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  afterEach(async () => { await gw?.stop(); gw = undefined; });

  const start = () => startTestGateway({
    dir: tmp.dir,
    config: {
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-4o', maxRetries: 0 } },
      agents: { defaults: { tools: { preset: 'messaging' } } },
    },
  });
  const post = (url: string, body: unknown) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('a web chat photo reaches the model as an image; a send_file reply comes back as a link that serves the file', async () => {
    gw = await start();
    const workspace = gw.config.agents[0]!.workspace;
    mkdirSync(workspace, { recursive: true });
    writeFileSync(path.join(workspace, 'report.txt'), 'quarterly numbers\n');
    const photo = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#aa0000' } }).png().toBuffer();
    let call = 0;
    openai.fallback = () => (++call === 1
      ? { toolCalls: [{ id: 'c1', name: 'send_file', arguments: JSON.stringify({ path: 'report.txt', caption: 'here it is' }) }] }
      : { content: 'Sent.' });

    const webchat = gw.adapters.find(isWebchatChannel)!;
    const pushed: WebchatPush[] = [];
    webchat.subscribe('ann', { reply: (push) => pushed.push(push), close: () => undefined });
    const response = await post(`${gw.url}/webchat/messages`, { user: 'ann', text: 'what colour? and send me the report', attachments: [{ name: 'p.png', mime: 'image/png', dataBase64: photo.toString('base64') }] });
    expect(response.status).toBe(200);
    const answer = await response.json() as { reply: string };
    expect(answer.reply).toBe('Sent.');
    const first = openai.requests[0]!;
    expect(lastUser(first)).toContain('what colour?');
    expect(first.images).toHaveLength(1);
    expect(first.images[0]!.mime).toBe('image/jpeg'); // no alpha: downscaled copies are JPEG
    // The file went to the user's pages as it was sent (the page shows it as a link), stored under its hash.
    const file = pushed.flatMap((p) => p.files ?? [])[0]!;
    expect(file).toMatchObject({ name: 'report.txt', mime: 'text/plain' });
    expect(pushed.find((p) => p.files)!.text).toBe('here it is');
    const served = await fetch(`${gw.url}/media/${file.sha256}?name=report.txt`);
    expect(served.status).toBe(200);
    expect(await served.text()).toBe('quarterly numbers\n');
  });

  it('/v1/chat/completions passes a data URL image part to the model', async () => {
    gw = await start();
    const photo = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#00aa00' } }).jpeg().toBuffer();
    const response = await post(`${gw.url}/v1/chat/completions`, {
      model: 'main', messages: [{ role: 'user', content: [{ type: 'text', text: 'describe' }, { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${photo.toString('base64')}` } }] }],
    });
    expect(response.status).toBe(200);
    const request = openai.requests.at(-1)!;
    expect(lastUser(request)).toContain('describe');
    expect(request.images).toHaveLength(1);
    expect(request.images[0]!.mime).toBe('image/jpeg');
  });

  it('gateway.maxBodyBytes still holds for the text of a body; only its attachments may go past it', async () => {
    gw = await startTestGateway({ dir: tmp.dir, config: { gateway: { port: 0, maxBodyBytes: 4096 }, providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-4o', maxRetries: 0 } } } });
    const photo = await sharp({ create: { width: 200, height: 200, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 60 } } }).png().toBuffer();
    expect(photo.length * 4 / 3).toBeGreaterThan(4096);
    const attachment = { name: 'noise.png', mime: 'image/png', dataBase64: photo.toString('base64') };
    const ok = await post(`${gw.url}/webchat/messages`, { user: 'bo', text: 'small text', attachments: [attachment] });
    expect(ok.status).toBe(200);
    const tooLong = await post(`${gw.url}/webchat/messages`, { user: 'bo', text: 'x'.repeat(5000), attachments: [attachment] });
    expect(tooLong.status).toBe(413);
    expect(await tooLong.json()).toMatchObject({ error: { code: 'body_too_large' } });
    const api = await post(`${gw.url}/v1/chat/completions`, { model: 'main', messages: [{ role: 'user', content: [{ type: 'text', text: 'y'.repeat(5000) }, { type: 'image_url', image_url: { url: `data:image/png;base64,${attachment.dataBase64}` } }] }] });
    expect(api.status).toBe(413);
  });
});
