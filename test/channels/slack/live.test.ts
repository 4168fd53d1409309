import { webApi } from '@slack/bolt';
import { afterEach, describe, expect, it } from 'vitest';
import { slackLiveCalls } from '../../../channels/slack/live.ts';
import { renderSlackChunks } from '../../../channels/slack/render.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { dmEvent, eventCallback, mentionEvent, nextTs, startFakeSlack, type FakeSlack, type SlackCall } from '../../fakes/fake-slack.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import { BOT_TOKEN, postSlack, SIGNING_SECRET, until } from './helpers.ts';

/** An answer of `n` plain words (each rendered prefix extends the one before: appended as it is). */
const plainAnswer = (n: number, prefix = 'word') => `${Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(' ')}.`;

/** An answer with markup spread through it, as a model writes. */
const markedAnswer = (n: number) => `${Array.from({ length: n }, (_, i) => (i % 11 === 3 ? `**bold ${i}**` : i % 13 === 5 ? `\`code_${i}\`` : `w${i}`)).join(' ')}.`;

const LIVE_METHODS = ['chat.postMessage', 'chat.update', 'chat.startStream', 'chat.appendStream', 'chat.stopStream'];

interface World {
  slack: FakeSlack;
  llm: FakeOpenAI;
  gw: RunningGateway;
  /** The live calls since `from` (an index into `slack.calls`). */
  liveCalls(from: number, method?: string): SlackCall[];
  close(): Promise<void>;
}

/** The whole gateway, Slack in HTTP mode (real bolt) against the fake, the model streaming at ~30 tokens/s. */
async function startWorld(streaming: Record<string, unknown> = { direct: 'partial', intervalMs: 300 }): Promise<World> {
  const slack = await startFakeSlack();
  const llm = await startFakeOpenAI();
  const tmp = tempDir();
  const gw = await startTestGateway({
    dir: tmp.dir,
    env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl, OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'sk-test' },
    config: { channels: { slack: { mode: 'http', dmPolicy: 'open', channels: ['C777'], streaming } } },
  });
  return {
    slack, llm, gw,
    liveCalls: (from, method) => slack.calls.slice(from).filter((c) => (method ? c.method === method : LIVE_METHODS.includes(c.method))),
    close: async () => {
      await gw.stop();
      await slack.close();
      await llm.close();
      tmp.remove();
    },
  };
}

/** The text the fake shows in the bot's messages of `channel` (in `threadTs` when given), oldest first. */
function shownIn(slack: FakeSlack, channel: string, threadTs?: string) {
  return [...slack.shown.values()].filter((m) => m.channel === channel && (threadTs === undefined || m.threadTs === threadTs));
}

describe('Slack live replies through the gateway (SPEC §16; real bolt, fake Slack Web API)', () => {
  let world: World | undefined;
  afterEach(async () => {
    await world?.close();
    world = undefined;
  });

  it('partial in a top-level DM: one chat.postMessage, then chat.update until it shows the whole rendered answer, in a bounded number of calls', async () => {
    world = await startWorld();
    const { slack, llm, gw } = world;
    const answer = markedAnswer(60); // 60 tokens at ~30/s: ~2 s
    const rendered = renderSlackChunks(answer);
    expect(rendered).toHaveLength(1);
    llm.script.push({ content: answer, chunkDelayMs: 33 });
    const from = slack.calls.length;
    expect((await postSlack(gw, eventCallback(dmEvent('stream please', { channel: 'D123' })))).status).toBe(200);
    await until(() => shownIn(slack, 'D123')[0]?.text === rendered[0], 'the final chat.update', 15_000);
    const posts = world.liveCalls(from, 'chat.postMessage');
    const updates = world.liveCalls(from, 'chat.update');
    expect(posts).toHaveLength(1);
    expect(posts[0]!.body.thread_ts).toBeUndefined();
    expect(updates.length).toBeGreaterThanOrEqual(2);
    // ~2 s of streaming at one call per 300 ms, plus the final one: never a call per token.
    expect(posts.length + updates.length).toBeLessThanOrEqual(12);
    expect(world.liveCalls(from).every((c) => c.status === 200)).toBe(true);
    expect(world.liveCalls(from, 'chat.startStream')).toHaveLength(0);
  });

  it('in a thread where the workspace offers it: chat.startStream, appendStream with what each step adds, stopStream; it ends as the whole answer', async () => {
    world = await startWorld();
    const { slack, llm, gw } = world;
    const answer = plainAnswer(60);
    const rendered = renderSlackChunks(answer);
    expect(rendered).toHaveLength(1);
    llm.script.push({ content: answer, chunkDelayMs: 33 });
    const from = slack.calls.length;
    const thread = nextTs();
    expect((await postSlack(gw, eventCallback(dmEvent('stream in the thread', { channel: 'D123', threadTs: thread })))).status).toBe(200);
    await until(() => world!.liveCalls(from, 'chat.update').length === 1, 'the closing chat.update', 15_000);
    const [message, ...others] = shownIn(slack, 'D123', thread);
    expect(others).toHaveLength(0);
    expect(message).toMatchObject({ text: rendered[0], streaming: false });
    const starts = world.liveCalls(from, 'chat.startStream');
    const appends = world.liveCalls(from, 'chat.appendStream');
    expect(starts).toHaveLength(1);
    expect(starts[0]!.body).toMatchObject({ channel: 'D123', thread_ts: thread, recipient_user_id: 'U42', recipient_team_id: 'T1' });
    expect(appends.length).toBeGreaterThanOrEqual(2);
    // Each append carries only what is new: together with the first part they are the answer, once.
    expect([starts[0]!, ...appends].map((c) => String(c.body.markdown_text)).join('')).toBe(rendered[0]);
    expect(starts.length + appends.length).toBeLessThanOrEqual(12);
    expect(world.liveCalls(from, 'chat.postMessage')).toHaveLength(0);
    // Closed, the message is set once as mrkdwn (the stream's Markdown reading of `*x*` is italics).
    expect(world.liveCalls(from, 'chat.stopStream')).toHaveLength(1);
    expect(world.liveCalls(from, 'chat.update').map((c) => c.body.text)).toEqual([rendered[0]]);
    expect(world.liveCalls(from).every((c) => c.status === 200)).toBe(true);
  });

  it('a workspace without native streaming (unknown_method): chat.postMessage and chat.update instead, and the next reply does not ask again', async () => {
    world = await startWorld();
    const { slack, llm, gw } = world;
    slack.nativeStreaming = false;
    for (const [i, label] of ['first', 'second'].entries()) {
      const answer = plainAnswer(45, `${label}-`);
      const rendered = renderSlackChunks(answer)[0]!;
      llm.script.push({ content: answer, chunkDelayMs: 33 });
      const from = slack.calls.length;
      const thread = nextTs();
      expect((await postSlack(gw, eventCallback(dmEvent(`${label} question`, { channel: 'D123', threadTs: thread })))).status).toBe(200);
      await until(() => shownIn(slack, 'D123', thread)[0]?.text === rendered, `the ${label} answer`, 15_000);
      const posts = world.liveCalls(from, 'chat.postMessage');
      expect(posts).toHaveLength(1);
      expect(posts[0]!.body.thread_ts).toBe(thread);
      expect(world.liveCalls(from, 'chat.update').length).toBeGreaterThanOrEqual(1);
      // Asked once, on the first reply of the account; refused; never again.
      expect(world.liveCalls(from, 'chat.startStream')).toHaveLength(i === 0 ? 1 : 0);
      expect(world.liveCalls(from, 'chat.appendStream')).toHaveLength(0);
    }
    expect(slack.callsOf('chat.startStream')).toHaveLength(1);
  });

  it('a channel set to partial streams into the thread of the mention, naming its recipient (user and workspace)', async () => {
    world = await startWorld({ direct: 'partial', group: 'partial', intervalMs: 300 });
    const { slack, llm, gw } = world;
    const answer = plainAnswer(45);
    llm.script.push({ content: answer, chunkDelayMs: 33 });
    const from = slack.calls.length;
    const ts = nextTs();
    expect((await postSlack(gw, eventCallback(mentionEvent('stream here', { channel: 'C777', ts, user: 'U77' })))).status).toBe(200);
    await until(() => world!.liveCalls(from, 'chat.update').length === 1, 'the closing chat.update', 15_000);
    expect(world.liveCalls(from, 'chat.startStream')[0]!.body).toMatchObject({ channel: 'C777', thread_ts: ts, recipient_user_id: 'U77', recipient_team_id: 'T1' });
    expect(shownIn(slack, 'C777', ts)).toMatchObject([{ text: renderSlackChunks(answer)[0], streaming: false }]);
    expect(world.liveCalls(from, 'chat.postMessage')).toHaveLength(0);
  });

  it('channels do not stream by default: one chat.postMessage into the thread, no update, no stream', async () => {
    world = await startWorld();
    const { slack, llm, gw } = world;
    const answer = plainAnswer(45);
    llm.script.push({ content: answer, chunkDelayMs: 33 });
    const from = slack.calls.length;
    const ts = nextTs();
    expect((await postSlack(gw, eventCallback(mentionEvent('say a lot', { channel: 'C777', ts })))).status).toBe(200);
    await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'C777', 15_000);
    await new Promise((r) => setTimeout(r, 200));
    const posts = world.liveCalls(from, 'chat.postMessage');
    expect(posts).toHaveLength(1);
    expect(posts[0]!.body).toMatchObject({ thread_ts: ts, text: renderSlackChunks(answer)[0] });
    expect(world.liveCalls(from).map((c) => c.method)).toEqual(['chat.postMessage']);
  });
});

describe('slackLiveCalls: the live interface on native streaming (real web-api client, fake Slack)', () => {
  let slack: FakeSlack | undefined;
  afterEach(async () => {
    await slack?.close();
    slack = undefined;
  });
  const target: DeliveryTarget = { channel: 'slack', accountId: 'default', chatId: 'C777', chatType: 'channel', replyToId: 'C777:1700000000.000100', peerId: 'U42' };

  async function calls() {
    slack = await startFakeSlack();
    const client = new webApi.WebClient(BOT_TOKEN, { slackApiUrl: slack.apiUrl, retryConfig: { retries: 0 } });
    return slackLiveCalls(() => client, (_what, call) => call(), { teamId: () => 'T1' });
  }

  it('appends only what an edit adds; an edit that is not an extension stops the stream and is set with chat.update, as later ones are', async () => {
    const live = await calls();
    const ts = await live.post(target, 'Hello', {});
    expect(slack!.callsOf('chat.startStream')[0]!.body).toMatchObject({ thread_ts: '1700000000.000100', recipient_user_id: 'U42', recipient_team_id: 'T1', markdown_text: 'Hello' });
    // The renderer closes the bold it cut: the next step is not what was appended plus more.
    await live.edit(target, ts, 'Hello *wor*');
    await live.edit(target, ts, 'Hello *wor*');
    expect(slack!.callsOf('chat.appendStream').map((c) => c.body.markdown_text)).toEqual([' *wor*']);
    expect(slack!.shown.get(ts)).toMatchObject({ text: 'Hello *wor*', streaming: true });
    await live.edit(target, ts, 'Hello *world*');
    await live.edit(target, ts, 'Hello *world*, again');
    await live.end!(target, ts);
    expect(slack!.calls.map((c) => c.method)).toEqual(['chat.startStream', 'chat.appendStream', 'chat.stopStream', 'chat.update', 'chat.update']);
    expect(slack!.shown.get(ts)).toMatchObject({ text: 'Hello *world*, again', streaming: false });
  });

  it('end closes an open stream once; a replay edits the streamed ts with chat.update; a DM without a thread is posted, not streamed', async () => {
    const live = await calls();
    const ts = await live.post(target, 'Hi', {});
    await live.edit(target, ts, 'Hi *there*');
    await live.end!(target, ts);
    await live.end!(target, ts);
    expect(slack!.callsOf('chat.stopStream')).toHaveLength(1);
    // Closed, the streamed text is set once more as mrkdwn.
    expect(slack!.callsOf('chat.update').map((c) => c.body.text)).toEqual(['Hi *there*']);
    expect(slack!.shown.get(ts)).toMatchObject({ text: 'Hi *there*', streaming: false });
    // After a restart (a replay edits the journaled ts): nothing is known of the stream, so chat.update.
    const client = new webApi.WebClient(BOT_TOKEN, { slackApiUrl: slack!.apiUrl, retryConfig: { retries: 0 } });
    await slackLiveCalls(() => client, (_what, call) => call()).edit(target, ts, 'Hi there, after a restart');
    expect(slack!.callsOf('chat.update').map((c) => c.body.ts)).toEqual([ts, ts]);
    expect(slack!.shown.get(ts)?.text).toBe('Hi there, after a restart');
    const dmTs = await live.post({ ...target, chatId: 'D123', chatType: 'direct' }, 'Hi', {});
    expect(slack!.shown.get(dmTs)).toMatchObject({ channel: 'D123', streaming: false });
    expect(slack!.callsOf('chat.postMessage')).toHaveLength(1);
  });
});
