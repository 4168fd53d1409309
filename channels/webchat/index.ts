import { randomUUID } from 'node:crypto';
import type { ChannelAdapter, ChannelStatus, HttpRoute, InboundSink, TurnResult } from '../../src/core/channel-adapter.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { outboundText } from '../../src/core/message.ts';
import type { Clock } from '../../src/core/clock.ts';
import { SwitchboardError } from '../../src/core/errors.ts';

/** Options of {@link createWebchatChannel}. */
export interface WebchatOptions {
  clock: Clock;
}

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
const fail = (status: number, message: string, code: string) => json(status, { error: { message, type: status === 400 ? 'invalid_request_error' : 'server_error', code } });

/** 429 in OpenAI's error shape with `Retry-After` (SPEC §14). */
function rateLimited(retryAfterSeconds: number): Response {
  return new Response(JSON.stringify({ error: { message: `Too many messages from you; try again in ${retryAfterSeconds} s.`, type: 'rate_limit_error', code: 'rate_limit_exceeded' } }), {
    status: 429, headers: { 'content-type': 'application/json', 'retry-after': String(retryAfterSeconds) },
  });
}

/** Reply text of a finished turn: every reply, notices first. */
export function replyText(result: TurnResult | undefined): string {
  return (result?.replies ?? []).map(outboundText).join('\n\n');
}

/**
 * The built-in web chat: `POST /webchat/messages` with `{ user, text }` answers `{ sessionKey, reply }`,
 * or streams Server-Sent Events (`delta` events, then `done`) when the client accepts `text/event-stream`.
 */
export function createWebchatChannel(options: WebchatOptions): ChannelAdapter {
  let sink: InboundSink | undefined;
  let status: ChannelStatus = 'stopped';

  const handle: HttpRoute['handle'] = async (request, _params, context) => {
    if (!sink) return fail(503, 'The web chat is not running.', 'channel_stopped');
    let body: unknown;
    try {
      body = await request.json();
    } catch {
      return fail(400, 'The request body is not valid JSON; send {"user": "...", "text": "..."}.', 'invalid_json');
    }
    const { user, text } = (body ?? {}) as { user?: unknown; text?: unknown };
    if (typeof text !== 'string' || !text.trim()) return fail(400, 'Field "text" must be a non-empty string.', 'invalid_text');
    if (user !== undefined && (typeof user !== 'string' || !/^[\w.@+-]{1,128}$/.test(user))) {
      return fail(400, 'Field "user" must be 1-128 letters, digits or . _ @ + -.', 'invalid_user');
    }
    const name = user ?? 'web';
    const message: InboundMessage = {
      id: randomUUID(), channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: name, peerId: name,
      sender: { id: name, name }, text, attachments: [], mentionsBot: true, receivedAt: options.clock.now(),
      correlationId: context.correlationId,
    };
    const streaming = (request.headers.get('accept') ?? '').includes('text/event-stream');
    if (!streaming) {
      const submission = await sink(message, { signal: request.signal });
      if (submission.status === 'rate_limited') return rateLimited(submission.retryAfterSeconds ?? 60);
      const result = await submission.done;
      return json(200, { sessionKey: submission.sessionKey, sessionId: result?.sessionId, reply: replyText(result), correlationId: submission.correlationId });
    }
    const encoder = new TextEncoder();
    const currentSink = sink;
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        const send = (event: string, data: unknown) => {
          try {
            controller.enqueue(encoder.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`));
          } catch { /* client went away */ }
        };
        try {
          const submission = await currentSink(message, { onDelta: (delta) => send('delta', { text: delta }), signal: request.signal });
          if (submission.status === 'rate_limited') {
            send('error', { error: { message: `Too many messages; try again in ${submission.retryAfterSeconds ?? 60} s.`, type: 'rate_limit_error', code: 'rate_limit_exceeded' }, retryAfterSeconds: submission.retryAfterSeconds, correlationId: context.correlationId });
            controller.close();
            return;
          }
          const result = await submission.done;
          send('done', { sessionKey: submission.sessionKey, sessionId: result?.sessionId, reply: replyText(result), correlationId: submission.correlationId });
        } catch (error) {
          // Refused (too long, shutting down): said in the stream, whose headers are already sent.
          const known = error instanceof SwitchboardError;
          send('error', { error: { message: known ? error.message : 'The message could not be handled.', code: known ? error.code.toLowerCase() : 'internal_error' }, correlationId: context.correlationId });
        }
        controller.close();
      },
    });
    return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' } });
  };

  return {
    id: 'webchat',
    accountId: 'default',
    get status() { return status; },
    async start(s) { sink = s; status = 'running'; },
    async stop() { sink = undefined; status = 'stopped'; },
    // Replies go back in the HTTP response; nothing to push.
    async send() {},
    routes: () => [{ method: 'POST', path: '/webchat/messages', handle }],
  };
}
