import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../../src/main.ts';
import { conversation, lastUser, startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { channelMessageEvent, dmEvent, eventCallback, mentionEvent, nextTs, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import { BOT_TOKEN, postSlack, sessionKeys, SIGNING_SECRET, until } from './helpers.ts';

describe('Slack in HTTP mode, through the whole gateway (real bolt, fake Slack Web API, signed events)', () => {
  let slack: FakeSlack;
  let llm: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;

  beforeEach(async () => {
    slack = await startFakeSlack();
    llm = await startFakeOpenAI((r) => ({ content: `echo: ${lastUser(r)}` }));
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await slack.close();
    await llm.close();
    tmp.remove();
  });

  const start = async (slackConfig: Record<string, unknown> = {}, session: Record<string, unknown> = {}) => {
    gw = await startTestGateway({
      dir: tmp.dir,
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl, OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'sk-test' },
      config: { channels: { slack: { mode: 'http', dmPolicy: 'open', channels: ['C777'], ...slackConfig } }, session },
    });
    expect(gw.adapters.find((a) => a.id === 'slack')?.status).toBe('running');
    return gw;
  };
  const posts = () => slack.callsOf('chat.postMessage');

  it('answers a DM in the DM, under the main session by default, and lists the session', async () => {
    const g = await start();
    const response = await postSlack(g, eventCallback(dmEvent('hello slack')));
    expect(response.status).toBe(200);
    const reply = await slack.waitFor('chat.postMessage');
    expect(reply.body).toMatchObject({ channel: 'D123', text: 'echo: hello slack' });
    expect(reply.body.thread_ts).toBeUndefined();
    expect(reply.headers.authorization).toBe(`Bearer ${BOT_TOKEN}`);
    await until(async () => (await sessionKeys(g)).includes('agent:main:main'), 'the session entry');
    const entry = (await (await fetch(`${g.url}/admin/sessions/${encodeURIComponent('agent:main:main')}`)).json()) as Record<string, unknown>;
    expect(entry).toMatchObject({ channel: 'slack', accountId: 'default', chatType: 'direct' });
  });

  it('keys DMs per peer under dmScope per-peer and per-channel-peer', async () => {
    const g = await start({}, { dmScope: 'per-channel-peer' });
    await postSlack(g, eventCallback(dmEvent('one', { user: 'U42' })));
    await postSlack(g, eventCallback(dmEvent('two', { user: 'U77', channel: 'D777' })));
    await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'D777');
    await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'D123');
    await until(async () => (await sessionKeys(g)).length === 2, 'two sessions');
    expect(await sessionKeys(g)).toEqual(['agent:main:slack:direct:u42', 'agent:main:slack:direct:u77']);
  });

  it('answers an app_mention in the thread of the mentioning message, once although Slack also sends it as a message', async () => {
    const g = await start();
    const ts = nextTs();
    const text = '<@UBOT> what is up?';
    // Slack delivers a channel mention twice: as message.channels and as app_mention (different event ids).
    expect((await postSlack(g, eventCallback(channelMessageEvent(text, { ts })))).status).toBe(200);
    expect((await postSlack(g, eventCallback({ ...mentionEvent('', { ts }), text }))).status).toBe(200);
    const reply = await slack.waitFor('chat.postMessage');
    expect(reply.body).toMatchObject({ channel: 'C777', thread_ts: ts, text: 'echo: what is up?' });
    await until(async () => (await sessionKeys(g)).includes('agent:main:slack:channel:c777'), 'the channel session');
    expect(posts()).toHaveLength(1);
    expect(llm.requests).toHaveLength(1);
  });

  it('continues a thread: replies in the thread the bot answered in share the thread session and need no mention', async () => {
    const g = await start();
    const parent = nextTs();
    await postSlack(g, eventCallback(mentionEvent('start a plan', { ts: parent })));
    await slack.waitFor('chat.postMessage', (c) => c.body.thread_ts === parent);
    await postSlack(g, eventCallback(channelMessageEvent('step two', { threadTs: parent })));
    await slack.waitFor('chat.postMessage', (c) => String(c.body.text).endsWith('step two'));
    await postSlack(g, eventCallback(channelMessageEvent('step three', { threadTs: parent })));
    const third = await slack.waitFor('chat.postMessage', (c) => c.body.text === 'echo: step three');
    expect(posts()).toHaveLength(3);
    expect(third.body).toMatchObject({ channel: 'C777', thread_ts: parent });

    const threadKey = `agent:main:slack:channel:c777:thread:${parent}`;
    await until(async () => (await sessionKeys(g)).includes(threadKey), 'the thread session');
    expect(await sessionKeys(g)).toEqual(['agent:main:slack:channel:c777', threadKey]);
    // The thread's first message carries what the bot said there; the next one has the thread's history.
    const firstInThread = conversation(llm.requests[1]!);
    expect(firstInThread.at(-1)).toContain('[replying to: echo: start a plan]');
    const secondInThread = conversation(llm.requests[2]!);
    expect(secondInThread).toHaveLength(3);
    expect(secondInThread[0]).toMatch(/step two$/);
    expect(secondInThread[2]).toBe('step three');
  });

  it('keeps unmentioned channel messages as context and answers only the mention', async () => {
    const g = await start();
    slack.users.U9 = 'Dana';
    await postSlack(g, eventCallback(channelMessageEvent('the deploy is at 5pm', { user: 'U9' })));
    expect(g.gateway.stats.skipped).toBe(1);
    await postSlack(g, eventCallback(mentionEvent('when is the deploy?')));
    await slack.waitFor('chat.postMessage');
    expect(lastUser(llm.requests[0]!)).toContain('Dana: the deploy is at 5pm');
    expect(posts()).toHaveLength(1);
  });

  it('refuses channels outside the allowlist', async () => {
    const g = await start();
    await postSlack(g, eventCallback(mentionEvent('hi', { channel: 'C999' })));
    expect(g.gateway.stats.blocked).toBe(1);
    expect(llm.requests).toHaveLength(0);
  });

  it('ignores edits, deletions, bot messages and its own messages', async () => {
    const g = await start();
    const ignored = [
      { type: 'message', subtype: 'message_changed', channel: 'D123', channel_type: 'im', hidden: true, message: { text: 'edited', user: 'U42' }, ts: nextTs() },
      { type: 'message', subtype: 'message_deleted', channel: 'D123', channel_type: 'im', hidden: true, deleted_ts: '1.2', ts: nextTs() },
      { type: 'message', subtype: 'bot_message', channel: 'D123', channel_type: 'im', bot_id: 'BOTHER', text: 'beep', ts: nextTs() },
      { ...dmEvent('my own reply'), user: 'UBOT', bot_id: 'BBOT' },
    ];
    for (const event of ignored) expect((await postSlack(g, eventCallback(event))).status).toBe(200);
    expect(g.gateway.stats).toMatchObject({ accepted: 0, blocked: 0, skipped: 0 });
    expect(posts()).toHaveLength(0);
  });

  it('refuses a bad signature and a stale timestamp with 401, processing nothing', async () => {
    const g = await start();
    const bad = await postSlack(g, eventCallback(dmEvent('forged')), { secret: 'not-the-secret' });
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { error: { type: string } }).error.type).toBe('unauthorized');
    const stale = await postSlack(g, eventCallback(dmEvent('replayed')), { timestampSec: Math.floor(Date.now() / 1000) - 6 * 60 });
    expect(stale.status).toBe(401);
    const unsigned = await fetch(`${g.url}/webhooks/slack/default`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(eventCallback(dmEvent('x'))) });
    expect(unsigned.status).toBe(401);
    expect(g.gateway.stats).toMatchObject({ accepted: 0, duplicates: 0, blocked: 0 });
    expect(llm.requests).toHaveLength(0);
    expect(await sessionKeys(g)).toEqual([]);
  });

  it('answers url_verification with the challenge (signed only)', async () => {
    const g = await start();
    const body = { token: 'legacy', challenge: 'chal-123', type: 'url_verification' };
    const response = await postSlack(g, body);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ challenge: 'chal-123' });
    const unsigned = await fetch(`${g.url}/webhooks/slack/default`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(unsigned.status).toBe(401);
  });

  it('answers a redelivered event_id once: a retry with X-Slack-Retry-Num, concurrently, and after a restart', async () => {
    const g = await start();
    const body = eventCallback(dmEvent('only once'), { eventId: 'EvRETRY1' });
    const [first, concurrent] = await Promise.all([postSlack(g, body), postSlack(g, body, { headers: { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' } })]);
    expect([first.status, concurrent.status]).toEqual([200, 200]);
    await slack.waitFor('chat.postMessage');
    const retry = await postSlack(g, body, { headers: { 'x-slack-retry-num': '2', 'x-slack-retry-reason': 'http_timeout' } });
    expect(retry.status).toBe(200);
    await until(() => g.gateway.lanes.isRunning('agent:main:main') === false, 'the turn to end');
    await g.stop();

    gw = await startTestGateway({
      dir: tmp.dir,
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl, OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'sk-test' },
      config: { channels: { slack: { mode: 'http', dmPolicy: 'open' } } },
    });
    expect((await postSlack(gw, body, { headers: { 'x-slack-retry-num': '3' } })).status).toBe(200);
    expect(gw.gateway.stats.duplicates).toBe(1);
    expect(posts()).toHaveLength(1);
    expect(llm.requests).toHaveLength(1);
  });

  it('retries a rate-limited chat.postMessage after Retry-After', async () => {
    const g = await start();
    // Retry-After 0 (web-api reads whole seconds): the retry is the SDK's, and the test waits no real second.
    slack.script('chat.postMessage', { status: 429, headers: { 'retry-after': '0' }, body: { error: 'ratelimited' } });
    await postSlack(g, eventCallback(dmEvent('busy?')));
    const delivered = await slack.waitFor('chat.postMessage', undefined, 8000);
    expect(delivered.body.text).toBe('echo: busy?');
    const [limited, ok] = posts();
    expect(limited!.status).toBe(429);
    expect(ok!.status).toBe(200);
    expect(ok!.body.text).toBe(limited!.body.text);
    expect(posts()).toHaveLength(2);
  });

  it('sends a pairing code to an unknown DM sender under the default dmPolicy', async () => {
    const g = await start({ dmPolicy: 'pairing' });
    await postSlack(g, eventCallback(dmEvent('let me in', { user: 'U500', channel: 'D500' })));
    const reply = await slack.waitFor('chat.postMessage');
    expect(reply.body.channel).toBe('D500');
    expect(String(reply.body.text)).toMatch(/pairing code: [A-Z0-9]{8}/i);
    expect(llm.requests).toHaveLength(0);
  });

  it('serves several workspaces, each on its own webhook with its own secret and token', async () => {
    gw = await startTestGateway({
      dir: tmp.dir,
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl, OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'sk-test' },
      config: {
        channels: { slack: { mode: 'http', dmPolicy: 'open', accounts: { work: { botToken: 'xoxb-work-token', signingSecret: 'work-signing-secret' } } } },
        session: { dmScope: 'per-account-channel-peer' },
      },
    });
    expect(gw.adapters.filter((a) => a.id === 'slack').map((a) => [a.accountId, a.status])).toEqual([['default', 'running'], ['work', 'running']]);
    expect((await postSlack(gw, eventCallback(dmEvent('wrong secret')), { accountId: 'work' })).status).toBe(401);
    expect((await postSlack(gw, eventCallback(dmEvent('from work')), { accountId: 'work', secret: 'work-signing-secret' })).status).toBe(200);
    const reply = await slack.waitFor('chat.postMessage');
    expect(reply.headers.authorization).toBe('Bearer xoxb-work-token');
    await until(async () => (await sessionKeys(gw!)).length === 1, 'the session');
    expect(await sessionKeys(gw)).toEqual(['agent:main:slack:work:direct:u42']);
  });

  it('answers 503 to events while the channel is not running, but still verifies the URL', async () => {
    slack.script('auth.test', { body: { ok: false, error: 'invalid_auth' } });
    gw = await startTestGateway({
      dir: tmp.dir,
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl },
      config: { channels: { slack: { mode: 'http' } } },
    });
    expect(gw.adapters.find((a) => a.id === 'slack')?.status).toBe('failed');
    expect((await postSlack(gw, eventCallback(dmEvent('anyone?')))).status).toBe(503);
    expect(await (await postSlack(gw, { type: 'url_verification', challenge: 'c1' })).json()).toEqual({ challenge: 'c1' });
  });

  it('answers 503 (so Slack retries later) to an event that arrives while the gateway shuts down', async () => {
    const g = await start();
    await g.gateway.close(100);
    const response = await postSlack(g, eventCallback(dmEvent('too late'), { eventId: 'EvLATE' }));
    expect(response.status).toBe(503);
    expect(posts()).toHaveLength(0);
  });

  it('splits a long reply into messages of at most 4000 characters in the same thread', async () => {
    const g = await start();
    llm.script.push({ content: `${'word '.repeat(1200)}\n\n\`\`\`\n${'x = 1\n'.repeat(900)}\`\`\`` });
    const ts = nextTs();
    await postSlack(g, eventCallback(mentionEvent('long please', { ts })));
    await until(() => posts().length >= 3, 'three messages');
    await until(() => !g.gateway.lanes.isRunning('agent:main:slack:channel:c777'), 'the turn to end');
    for (const call of posts()) {
      expect(String(call.body.text).length).toBeLessThanOrEqual(4000);
      expect(call.body.thread_ts).toBe(ts);
    }
    // Every message has whole code blocks: the long one was cut between lines and re-fenced.
    for (const call of posts()) expect(String(call.body.text).split('```').length % 2).toBe(1);
    expect(posts().map((c) => String(c.body.text)).join('').match(/x = 1/g)).toHaveLength(900);
  });
});
