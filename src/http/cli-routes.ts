import { randomUUID } from 'node:crypto';
import { streamSSE } from 'hono/streaming';
import type { Clock } from '../core/clock.ts';
import type { InboundSink } from '../core/channel-adapter.ts';
import { BadRequestError } from '../core/errors.ts';
import { outboundText, type InboundMessage } from '../core/message.ts';
import type { HttpApp } from './app.ts';
import { jsonError, readJson } from './http-error.ts';

/** The message `switchboard chat` sends for one line typed by `user` (channel `cli`, a direct chat). */
export function cliMessage(user: string, text: string, now: number, correlationId?: string): InboundMessage {
  return {
    id: randomUUID(), channel: 'cli', accountId: 'default', chatType: 'direct', chatId: user, peerId: user,
    sender: { id: user, name: user }, text, attachments: [], mentionsBot: true, receivedAt: now,
    ...(correlationId ? { correlationId } : {}),
  };
}

/**
 * `POST /cli/messages` `{ user, text }`: the turn of `switchboard chat` when a gateway runs, through the
 * whole pipeline on channel `cli`. Answers Server-Sent Events: `delta` `{ text }` while the reply streams,
 * then `done` `{ sessionKey, sessionId, reply, correlationId, outcome }`. Over `limits.perSender` it answers
 * 429 with `Retry-After` (OpenAI's error shape) instead of a stream.
 */
export function mountCliRoutes(deps: { sink: InboundSink; clock: Clock }): (app: HttpApp) => void {
  return (app) => {
    app.post('/cli/messages', async (c) => {
      const body = await readJson(c) as { user?: unknown; text?: unknown } | null;
      const text = body?.text;
      const user = body?.user ?? 'me';
      if (typeof text !== 'string' || !text.trim()) throw new BadRequestError('Field "text" must be a non-empty string.', 'invalid_text');
      if (typeof user !== 'string' || !/^[\w.@+-]{1,128}$/.test(user)) throw new BadRequestError('Field "user" must be 1-128 letters, digits or . _ @ + -.', 'invalid_user');
      const abort = new AbortController();
      const early: string[] = [];
      let forward = (delta: string) => { early.push(delta); };
      // Accepted (or refused with a JSON error) before the stream opens.
      const submission = await deps.sink(cliMessage(user, text, deps.clock.now(), c.get('correlationId')), { onDelta: (d) => forward(d), signal: abort.signal });
      // Over limits.perSender: said before any stream, so the terminal prints it (channel cli has no adapter for the notice).
      if (submission.status === 'rate_limited') {
        const seconds = submission.retryAfterSeconds ?? 60;
        c.header('retry-after', String(seconds));
        return jsonError(c, 429, `Slow down, please: too many messages from you; try again in ${seconds} s.`, 'rate_limit_exceeded');
      }
      return streamSSE(c, async (stream) => {
        stream.onAbort(() => abort.abort());
        let chain: Promise<void> = Promise.resolve();
        let streamed = false;
        const send = (delta: string) => {
          streamed = true;
          chain = chain.then(() => stream.writeSSE({ event: 'delta', data: JSON.stringify({ text: delta }) }));
        };
        for (const delta of early.splice(0)) send(delta);
        forward = send;
        const result = await submission.done;
        await chain;
        const reply = (result?.replies ?? []).map(outboundText).join('\n\n');
        await stream.writeSSE({
          event: 'done',
          data: JSON.stringify({
            sessionKey: submission.sessionKey, sessionId: result?.sessionId, reply, streamed, correlationId: submission.correlationId, outcome: result?.outcome ?? submission.status,
          }),
        });
      });
    });
  };
}
