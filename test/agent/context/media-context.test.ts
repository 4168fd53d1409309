import { describe, expect, it } from 'vitest';
import { buildContext, type ContextInput } from '../../../src/agent/context/context.ts';
import type { MediaRecord } from '../../../src/core/message.ts';
import type { ChatImage } from '../../../src/providers/types.ts';
import type { SessionEntry } from '../../../src/sessions/entry.ts';
import type { TranscriptEntry, TranscriptMessage } from '../../../src/sessions/transcript.ts';

const at = '2026-01-01T00:00:00.000Z';
const agent: ContextInput['agent'] = { id: 'main', name: 'Switchboard', providerId: 'default', model: 'gpt-4o', fallbacks: [], workspace: '/w', tools: { preset: 'none', allow: [], deny: [] }, tokenBudget: 0, vision: 'auto' };
const entry = () => ({ key: 'agent:main:main', channel: 'telegram', chatType: 'direct', overrides: {} } as unknown as SessionEntry);

function photo(id: string): MediaRecord {
  return { kind: 'image', mime: 'image/jpeg', size: 1000, sha256: `${id}-orig`, as: 'image', line: `[image: image/jpeg ${id}]`, modelSha256: id, modelMime: 'image/jpeg', modelWidth: 512, modelHeight: 512 };
}

const images: Record<string, ChatImage> = {
  one: { url: 'data:image/jpeg;base64,AAAA', tokens: 255 },
  two: { url: 'data:image/jpeg;base64,BBBB', tokens: 255 },
};
const imageOf = (r: MediaRecord) => (r.modelSha256 ? images[r.modelSha256] : undefined);

describe('images in a request (SPEC §15)', () => {
  const u1: TranscriptMessage = { type: 'message', id: 'u1', role: 'user', content: 'look at this', at, media: [photo('one')] };
  const a1: TranscriptMessage = { type: 'message', id: 'a1', role: 'assistant', content: 'a red square', at };
  const u2: TranscriptMessage = { type: 'message', id: 'u2', role: 'user', content: 'and this', at, media: [photo('two')] };

  it('a model that sees gets image parts on their user message, counted as the images component', () => {
    const built = buildContext({ agent, entry: entry(), history: [u1, a1, u2], model: 'gpt-4o', tools: [], now: 0, imageOf });
    const users = built.messages.filter((m) => m.role === 'user');
    expect(users.map((m) => m.images?.map((i) => i.url))).toEqual([[images.one!.url], [images.two!.url]]);
    expect(users[0]!.content).not.toContain('[image:');
    expect(built.components.images).toBe(510);
    expect(built.tokens).toBe(Object.values(built.components).reduce((a, b) => a + b, 0));
  });

  it('without an image source (vision off) each image is its line, and nothing counts as images', () => {
    const built = buildContext({ agent, entry: entry(), history: [u1, a1, u2], model: 'gpt-4o', tools: [], now: 0 });
    const users = built.messages.filter((m) => m.role === 'user');
    expect(users.every((m) => !m.images)).toBe(true);
    expect(users[0]!.content).toMatch(/look at this\n\[image: image\/jpeg one\]$/);
    expect(built.components.images).toBe(0);
  });

  it('a message kept verbatim across a compaction shows its image as the line; one after the compaction keeps its image', () => {
    const compaction: TranscriptEntry = { type: 'compaction', id: 'c1', summary: 'earlier talk', firstKeptId: 'u1', tokensBefore: 100, tokensAfter: 50, at };
    const built = buildContext({ agent, entry: entry(), history: [u1, a1, compaction, u2], model: 'gpt-4o', tools: [], now: 0, imageOf });
    const users = built.messages.filter((m) => m.role === 'user');
    expect(users).toHaveLength(2);
    expect(users[0]!.images).toBeUndefined();
    expect(users[0]!.content).toContain('[image: image/jpeg one]');
    expect(users[1]!.images?.map((i) => i.url)).toEqual([images.two!.url]);
    expect(built.components.images).toBe(255);
  });

  it('an image that is no longer at hand falls back to its line', () => {
    const gone: TranscriptMessage = { ...u2, id: 'u3', media: [photo('missing')] };
    const built = buildContext({ agent, entry: entry(), history: [gone], model: 'gpt-4o', tools: [], now: 0, imageOf });
    expect(built.messages[1]!.images).toBeUndefined();
    expect(built.messages[1]!.content).toContain('[image: image/jpeg missing]');
  });

  it('requests of one session repeat the same bytes for a message with an image (the prefix stays cacheable)', () => {
    const e = entry();
    const first = buildContext({ agent, entry: e, history: [u1, a1], model: 'gpt-4o', tools: [], now: 0, imageOf });
    const second = buildContext({ agent, entry: e, history: [u1, a1, u2], model: 'gpt-4o', tools: [], now: 0, imageOf });
    expect(JSON.stringify(second.messages.slice(0, first.messages.length))).toBe(JSON.stringify(first.messages));
  });
});
