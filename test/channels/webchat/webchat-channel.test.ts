import { describe, expect, it } from 'vitest';
import { createWebchatChannel, type WebchatPush } from '../../../channels/webchat/index.ts';
import type { InboundSink, Submission, TurnResult } from '../../../src/core/channel-adapter.ts';
import type { DeliveryTarget, InboundMessage } from '../../../src/core/message.ts';

const clock = { now: () => 1_700_000_000_000 };
const target = (user: string): DeliveryTarget => ({ channel: 'webchat', accountId: 'default', chatId: user, chatType: 'direct', peerId: user });

/** A sink that accepts every message and lets the test end its turn. */
function heldSink() {
  const messages: InboundMessage[] = [];
  let finish!: (result: TurnResult | undefined) => void;
  const sink: InboundSink = async (message) => {
    messages.push(message);
    const done = new Promise<TurnResult | undefined>((resolve) => { finish = resolve; });
    return { status: 'accepted', sessionKey: `agent:main:webchat:direct:${message.peerId}`, correlationId: 'c-1', done } satisfies Submission;
  };
  return { sink, messages, finish: (r?: TurnResult) => finish(r) };
}

function listen(channel: ReturnType<typeof createWebchatChannel>, user: string) {
  const got: WebchatPush[] = [];
  let closed = false;
  const stop = channel.subscribe(user, { reply: (p) => got.push(p), close: () => { closed = true; } });
  return { got, stop, closed: () => closed };
}

describe('web chat channel: replies outside a request', () => {
  it('a reply to a request still waiting stays in its answer; one with no waiting request (an internal message\'s) goes to the user\'s pages only', async () => {
    const channel = createWebchatChannel({ clock });
    const held = heldSink();
    await channel.start(held.sink);
    const ann = listen(channel, 'ann');
    const bob = listen(channel, 'bob');
    await channel.submit('ann', 'hello');
    const id = held.messages[0]!.id;
    await channel.send(target('ann'), { text: 'the answer', kind: 'reply', replyTo: id });
    await channel.send(target('ann'), { text: 'Your helper says: **done**', kind: 'reply' });
    expect(ann.got).toEqual([{ text: 'Your helper says: **done**', kind: 'reply', at: 1_700_000_000_000 }]);
    expect(bob.got).toEqual([]);
    // Once the turn is over, a reply naming that message is no longer carried by any request.
    held.finish();
    await new Promise((resolve) => setImmediate(resolve));
    await channel.send(target('ann'), { text: 'late', kind: 'notice', notice: 'Note', replyTo: id });
    expect(ann.got.at(-1)).toEqual({ text: 'Note\n\nlate', kind: 'notice', at: 1_700_000_000_000 });
  });

  it('a reply to a request whose page went away goes to the user\'s other pages', async () => {
    const channel = createWebchatChannel({ clock });
    const held = heldSink();
    await channel.start(held.sink);
    const ann = listen(channel, 'ann');
    const gone = new AbortController();
    await channel.submit('ann', 'hello', { signal: gone.signal });
    gone.abort();
    await channel.send(target('ann'), { text: 'the answer', kind: 'reply', replyTo: held.messages[0]!.id });
    expect(ann.got.map((p) => p.text)).toEqual(['the answer']);
  });

  it('pages may listen before the channel starts; stopping ends them, and a page that comes while stopped is ended at once', async () => {
    const channel = createWebchatChannel({ clock });
    const early = listen(channel, 'ann');
    await channel.start(heldSink().sink);
    await channel.send(target('ann'), { text: 'hi', kind: 'reply' });
    expect(early.got.map((p) => p.text)).toEqual(['hi']);
    await channel.stop();
    expect(early.closed()).toBe(true);
    const late = listen(channel, 'ann');
    expect(late.closed()).toBe(true);
    await expect(channel.submit('ann', 'hello')).rejects.toMatchObject({ code: 'CHANNEL_STOPPED', status: 503 });
  });

  it('a page that stops listening gets nothing more', async () => {
    const channel = createWebchatChannel({ clock });
    await channel.start(heldSink().sink);
    const ann = listen(channel, 'ann');
    ann.stop();
    await channel.send(target('ann'), { text: 'hi', kind: 'reply' });
    expect(ann.got).toEqual([]);
  });
});
