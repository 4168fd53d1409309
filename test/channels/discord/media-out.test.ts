import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDiscordChannel } from '../../../channels/discord/index.ts';
import type { ChannelAdapter, Submission } from '../../../src/core/channel-adapter.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import { startFakeDiscord, type FakeDiscord } from '../../fakes/fake-discord.ts';
import { FakeLeases, fakeCluster, MemoryWatermarks } from '../../fakes/fake-leases.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { until } from '../../helpers/wait.ts';
import { alice, ids } from './setup.ts';

const accepted = (): Submission => ({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('Discord media out (SPEC §15): image lines as embeds, files as attachments', () => {
  let discord: FakeDiscord;
  let adapter: ChannelAdapter;
  let tmp: ReturnType<typeof tempDir>;
  const dm: DeliveryTarget = { channel: 'discord', accountId: 'default', chatId: ids.dm, chatType: 'direct' };

  beforeEach(async () => {
    discord = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true } });
    tmp = tempDir();
    adapter = createDiscordChannel({
      account: { accountId: 'default', enabled: true, token: discord.token, apiBase: discord.api, dmPolicy: 'open', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: true },
      clock: new ManualClock(), logger: silentLogger(), stateDir: '/nonexistent', delivery: { maxAttempts: 4, baseDelayMs: 1, maxDelayMs: 2 },
    });
    let seen = false;
    await adapter.start(async () => { seen = true; return accepted(); });
    // The DM channel becomes known to the client as Discord makes it known: through a message in it.
    discord.message({ channel_id: ids.dm, content: 'hi', author: alice });
    await until(() => seen, 'the DM to be seen');
  });
  afterEach(async () => {
    await adapter.stop();
    await discord.close();
    tmp.remove();
  });

  it('text, an embed showing the image, text: in order, each with its own nonce', async () => {
    await adapter.send(dm, { text: 'Here:\n![chart](https://example.com/c.png)\nDone.', idempotencyKey: 'k:0' });
    const posts = discord.posts(ids.dm);
    expect(posts.map((p) => p.body?.content ?? null)).toEqual(['Here:', null, 'Done.']);
    expect(posts[1]!.body?.embeds).toEqual([expect.objectContaining({ image: { url: 'https://example.com/c.png' } })]);
    const nonces = posts.map((p) => p.body?.nonce);
    expect(new Set(nonces).size).toBe(3);
    expect(posts.every((p) => p.body?.enforce_nonce === true)).toBe(true);

    // The same reply again (a replay) carries the same nonces: Discord posts nothing new.
    await adapter.send(dm, { text: 'Here:\n![chart](https://example.com/c.png)\nDone.', idempotencyKey: 'k:0' });
    expect(discord.deduplicated).toBe(3);
  });

  it('files are uploaded after the text as attachments with their bytes and names; a 500 on the upload is tried again', async () => {
    const png = randomBytes(5000);
    const csv = randomBytes(12_000);
    writeFileSync(path.join(tmp.dir, 'chart.png'), png);
    writeFileSync(path.join(tmp.dir, 'data.csv'), csv);
    discord.failOnce((method, p) => method === 'POST' && p === `/api/v10/channels/${ids.dm}/messages` && discord.posts(ids.dm).length === 1, 500);
    await adapter.send(dm, {
      text: 'Attached.',
      files: [
        { path: path.join(tmp.dir, 'chart.png'), name: 'chart.png', mime: 'image/png', size: png.length },
        { path: path.join(tmp.dir, 'data.csv'), name: 'data.csv', mime: 'text/csv', size: csv.length },
      ],
    });
    const posts = discord.posts(ids.dm);
    expect(posts.map((p) => p.files?.map((f) => f.filename) ?? [])).toEqual([[], ['chart.png'], ['data.csv']]);
    expect(posts[0]!.body?.content).toBe('Attached.');
    expect(posts[1]!.files![0]).toMatchObject({ size: png.length, sha256: sha(png) });
    expect(posts[2]!.files![0]).toMatchObject({ size: csv.length, sha256: sha(csv) });
    expect(discord.calls.filter((c) => c.status === 500)).toHaveLength(1);
  });

  it('in a guild channel only the first message replies to the question', async () => {
    await adapter.send({ ...dm, chatId: ids.dm, chatType: 'channel', replyToId: '1300000000000000999' }, { text: '![a](https://example.com/a.png)\nafter' });
    const posts = discord.posts(ids.dm);
    expect(posts[0]!.body?.message_reference).toMatchObject({ message_id: '1300000000000000999' });
    expect(posts[1]!.body?.message_reference).toBeUndefined();
  });

  it('cluster mode (replies over REST): the same order, the embed, and the file as a multipart upload', async () => {
    const png = randomBytes(3000);
    writeFileSync(path.join(tmp.dir, 'pic.png'), png);
    const rest = createDiscordChannel({
      account: { accountId: 'default', enabled: true, token: discord.token, apiBase: discord.api, dmPolicy: 'open', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: true },
      clock: new ManualClock(), logger: silentLogger(), stateDir: '/nonexistent', cluster: fakeCluster(new FakeLeases(), 'replica-b', new MemoryWatermarks()),
    });
    await rest.start(async () => accepted());
    try {
      const before = discord.posts(ids.dm).length;
      await rest.send(dm, { text: 'Here:\n![chart](https://example.com/c.png)', files: [{ path: path.join(tmp.dir, 'pic.png'), name: 'pic.png', mime: 'image/png', size: png.length }] });
      const posts = discord.posts(ids.dm).slice(before);
      expect(posts.map((p) => [p.body?.content ?? null, (p.body?.embeds as { image: { url: string } }[] | undefined)?.[0]?.image.url ?? null, p.files?.[0]?.filename ?? null]))
        .toEqual([['Here:', null, null], [null, 'https://example.com/c.png', null], [null, null, 'pic.png']]);
      expect(posts[2]!.files![0]).toMatchObject({ size: png.length, sha256: sha(png) });
    } finally {
      await rest.stop();
    }
  });
});
