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
});
