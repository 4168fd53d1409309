import sharp from 'sharp';
import { readdirSync, existsSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { FileServingChannel } from '../helpers/file-serving-channel.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase({ migrate: false });

describePg('cluster mode: media in the shared database (SPEC §15)', () => {
  const running: { gw: RunningGateway; remove: () => void }[] = [];
  let openai: FakeOpenAI | undefined;
  afterEach(async () => {
    for (const r of running.splice(0)) { await r.gw.stop(); r.remove(); }
    await openai?.close();
  });

  async function replica(name: string): Promise<{ gw: RunningGateway; channel: FileServingChannel; dir: string }> {
    const tmp = tempDir();
    const channel = new FileServingChannel('telegram');
    const gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: {
        store: db.uri, cluster: { pollMs: 100, replicaId: name }, channels: { telegram: { dmPolicy: 'open' } },
        providers: { default: { baseUrl: openai!.baseURL, apiKey: 'sk-test', model: 'gpt-4o', maxRetries: 0 } },
        agents: { defaults: { tools: { preset: 'none' } } },
      },
    });
    running.push({ gw, remove: tmp.remove });
    return { gw, channel, dir: tmp.dir };
  }

  it('a replica that takes a session over rebuilds its context with the images another replica fetched', async () => {
    openai = await startFakeOpenAI();
    const a = await replica('ra');
    const photo = await sharp({ create: { width: 1600, height: 1200, channels: 3, background: '#123456' } }).jpeg().toBuffer();
    a.channel.files.set('photo-1', photo);
    await a.channel.inject('what is this?', { id: 'm1', attachments: [{ type: 'photo', fileId: 'photo-1', mimeType: 'image/jpeg' }] });
    await a.channel.waitForSent(1, 15_000);
    expect(openai.requests.at(-1)!.images).toHaveLength(1);
    const shownByA = openai.requests.at(-1)!.images[0]!.url;
    const stored = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM sb_media');
    expect(stored.rows[0]!.n).toBe(2); // the original and the downscaled copy the model sees
    await running.shift()!.gw.stop();

    const b = await replica('rb');
    await b.channel.inject('and now?', { id: 'm2' });
    await b.channel.waitForSent(1, 15_000);
    const request = openai.requests.at(-1)!;
    // B never fetched the photo (its channel has no such file) and keeps nothing on disk: the image came from PostgreSQL.
    expect(b.channel.fetched).toEqual([]);
    expect(request.images.map((i) => i.url)).toEqual([shownByA]);
    const local = path.join(b.dir, 'data', 'media');
    expect(existsSync(local) ? readdirSync(local) : []).toEqual([]);
  }, 60_000);
});
