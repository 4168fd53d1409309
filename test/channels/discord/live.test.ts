import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderDiscord } from '../../../channels/discord/render.ts';
import { ids, startDiscordWorld, type DiscordWorld } from './setup.ts';

describe('Discord live replies through the gateway (SPEC §16; real discord.js, fake Discord)', () => {
  let world: DiscordWorld;
  beforeAll(async () => {
    world = await startDiscordWorld({ channels: { discord: { streaming: { direct: 'partial', intervalMs: 300 } } } });
  });
  afterAll(async () => {
    await world.close();
  });

  it('partial in a DM: one message created, then edited (PATCH) until it is the whole answer', async () => {
    const answer = Array.from({ length: 60 }, (_, i) => (i % 7 === 2 ? `**b${i}**` : `w${i}`)).join(' ');
    world.openai.script.push({ content: answer, chunkDelayMs: 33 });
    const before = world.discord.posts(ids.dm).length;
    world.discord.message({ channel_id: ids.dm, content: 'stream please' });
    const final = renderDiscord({ text: answer })[0]!;
    const edits = () => world.discord.calls.filter((c) => c.method === 'PATCH' && c.path.startsWith(`/api/v10/channels/${ids.dm}/messages/`));
    for (let i = 0; i < 2000 && edits().at(-1)?.body?.content !== final; i++) await new Promise((r) => setTimeout(r, 10));
    expect(edits().at(-1)?.body?.content).toBe(final);
    expect(world.discord.posts(ids.dm).length - before).toBe(1);
    expect(edits().length).toBeGreaterThanOrEqual(2);
    expect(edits().every((c) => c.status === 200)).toBe(true);
  });

  it('an edit Discord answers 429 is sent again after its retry_after (not overtaken by a newer one), and the final edit still lands', async () => {
    const answer = Array.from({ length: 60 }, (_, i) => `r${i}`).join(' ');
    world.openai.script.push({ content: answer, chunkDelayMs: 33 });
    const from = world.discord.calls.length;
    const isEdit = (method: string, path: string) => method === 'PATCH' && path.startsWith(`/api/v10/channels/${ids.dm}/messages/`);
    // The first edit of the reply is refused for 0.8 s: longer than the 300 ms between edits.
    world.discord.rateLimitOnce(isEdit, 0.8);
    world.discord.message({ channel_id: ids.dm, content: 'stream through a rate limit' });
    const final = renderDiscord({ text: answer })[0]!;
    const edits = () => world.discord.calls.slice(from).filter((c) => isEdit(c.method, c.path));
    for (let i = 0; i < 2000 && edits().at(-1)?.body?.content !== final; i++) await new Promise((r) => setTimeout(r, 10));
    expect(edits().at(-1)).toMatchObject({ status: 200, body: { content: final } });
    const limited = edits().findIndex((c) => c.status === 429);
    expect(limited).toBeGreaterThanOrEqual(0);
    const retried = edits()[limited + 1]!;
    expect(retried).toMatchObject({ status: 200, body: { content: edits()[limited]!.body?.content } });
    expect(retried.at - edits()[limited]!.at).toBeGreaterThanOrEqual(750);
    expect(edits().filter((c) => c.status === 429)).toHaveLength(1);
    expect(world.discord.posts(ids.dm).filter((c) => world.discord.calls.indexOf(c) >= from)).toHaveLength(1);
  });
});
