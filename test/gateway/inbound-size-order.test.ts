import { afterEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { useTempDir } from '../helpers/fixtures.ts';

/**
 * The per-channel size limit is checked after the access policy, delivery dedupe and the rate limit (issue 16):
 * an oversized message from someone the bot would not answer, or delivered again, gets no "too long" line.
 */
describe('the inbound size limit comes after policy, dedupe and the rate limit', () => {
  const tmp = useTempDir('switchboard-size-order-');
  let gw: RunningGateway | undefined;
  const big = 'w'.repeat(500);
  const tooLong = (texts: string[]) => texts.filter((t) => t.startsWith('That message is too long for me'));
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async (telegram: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const channel = new TestChannel('telegram');
    gw = await startTestGateway({ dir: tmp.dir, adapters: [channel], config: { channels: { telegram: { maxInboundChars: 100, ...telegram } }, ...extra } });
    return channel;
  };

  it('a stranger under dmPolicy allowlist gets nothing for an oversized DM; an allowed sender gets the line', async () => {
    const channel = await start({ dmPolicy: 'allowlist', allowFrom: ['1'] });
    expect((await channel.inject(big, { peerId: '77' })).status).toBe('blocked');
    const allowed = await channel.inject(big, { peerId: '1' });
    expect(allowed.status).toBe('blocked');
    await channel.waitForSent(1);
    const ok = await channel.inject('hello', { peerId: '1' });
    await ok.done;
    expect(channel.sent.map((s) => s.target.chatId)).toEqual(['1', '1']);
    expect(channel.texts()[0]).toBe('That message is too long for me: 500 characters, and this channel takes at most 100 (channels.telegram.maxInboundChars). Please send it in shorter parts.');
    expect(channel.texts()[1]).toContain('(offline) You said: "hello"');
  });

  it('a stranger under dmPolicy pairing gets the pairing code, not "too long"', async () => {
    const channel = await start({ dmPolicy: 'pairing' });
    expect((await channel.inject(big, { peerId: '77' })).status).toBe('blocked');
    await channel.waitForSent(1);
    expect(tooLong(channel.texts())).toEqual([]);
    expect(channel.texts()[0]).toMatch(/[A-Z0-9]{8}/);
  });

  it('an oversized group message that does not address the bot is neither answered nor kept as context', async () => {
    const channel = await start({ dmPolicy: 'open', groupPolicy: 'open' });
    const group = { chatType: 'group' as const, chatId: 'g1', groupId: 'g1', peerId: '5' };
    expect((await channel.inject(big, group)).status).toBe('skipped');
    const addressed = await channel.inject('@bot hi', { ...group, mentionsBot: true });
    await addressed.done;
    expect(channel.texts()).toHaveLength(1);
    expect(tooLong(channel.texts())).toEqual([]);
    // Nor does it reach the model as group context, past the limit.
    const key = encodeURIComponent(addressed.sessionKey!);
    const history = (await (await fetch(`${gw!.url}/admin/sessions/${key}/history`)).json()) as { entries: { role?: string; content?: string }[] };
    const user = history.entries.filter((e) => e.role === 'user').map((e) => e.content ?? '');
    expect(user).toHaveLength(1);
    expect(user[0]).toContain('@bot hi');
    expect(user[0]).not.toContain('www');
  });

  it('a redelivery of an oversized message is answered once', async () => {
    const channel = await start({ dmPolicy: 'open' });
    const delivery = { peerId: '9', id: 'm-1', deliveryId: 'update-1' };
    expect((await channel.inject(big, delivery)).status).toBe('blocked');
    expect((await channel.inject(big, delivery)).status).toBe('duplicate');
    await channel.waitForSent(1);
    const ok = await channel.inject('after', { peerId: '9' });
    await ok.done;
    expect(tooLong(channel.texts())).toHaveLength(1);
    expect(channel.texts()).toHaveLength(2);
  });

  it('a sender over the rate limit gets the slow-down line, not "too long"', async () => {
    const channel = await start({ dmPolicy: 'open' }, { limits: { perSender: { perMinute: 1, burst: 1 } } });
    await (await channel.inject('first', { peerId: '3' })).done;
    expect((await channel.inject(big, { peerId: '3' })).status).toBe('rate_limited');
    await channel.waitForSent(2);
    expect(channel.texts()[1]).toMatch(/^Slow down, please/);
    expect(tooLong(channel.texts())).toEqual([]);
  });
});
