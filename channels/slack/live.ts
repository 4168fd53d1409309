import { webApi } from '@slack/bolt';
import type { LiveReplyCalls } from '../../src/core/channel-adapter.ts';
import type { Logger } from '../../src/core/logger.ts';
import { outboundText, type DeliveryTarget } from '../../src/core/message.ts';
import { tsOfMessageId } from './normalize.ts';
import { renderSlackChunks } from './render.ts';

/** Runs one Web API call of a delivery with the channel's retries (`delivery.maxAttempts`). */
type Attempt = <T>(what: string, call: () => Promise<T>) => Promise<T>;

/** Slack's answers meaning this workspace (or this token) has no native streaming: the account stops asking. */
export const NO_NATIVE_STREAMING = new Set(['unknown_method', 'not_allowed_token_type', 'method_deprecated', 'invalid_arguments', 'feature_not_enabled']);

function platformError(error: unknown): string | undefined {
  const e = error as { code?: string; data?: { error?: string } } | undefined;
  return e?.code === webApi.ErrorCode.PlatformError ? e.data?.error ?? '' : undefined;
}

/** Options of {@link slackLiveCalls}. */
export interface SlackLiveOptions {
  /** The workspace of the bot (`recipient_team_id` of a stream). */
  teamId?: () => string | undefined;
  /** The channel's logger (read when something is logged). */
  logger?: () => Logger;
}

/**
 * A live reply on Slack (SPEC §16). Where the reply goes to a thread (a channel message answered in its thread,
 * a DM or assistant thread), Slack's native streaming: `chat.startStream` with the first part, `chat.appendStream`
 * with what each later part adds to the text already appended, `chat.stopStream` once the reply is complete; a
 * part that does not extend the text appended (the renderer closed markup differently) stops the stream and is
 * set with `chat.update`, as are later ones. Elsewhere (a top-level DM), or once the workspace refused the
 * streaming calls (`unknown_method`, `not_allowed_token_type`, …; remembered for the account, not asked again):
 * `chat.postMessage`, then `chat.update` with the whole text rendered to mrkdwn again. The posted ts is what
 * the gateway journals either way, so a replay edits it with `chat.update`. A rate-limited call (429,
 * `Retry-After`) is waited out and tried again by the channel's retries, which delays the next update.
 */
export function slackLiveCalls(client: () => webApi.WebClient, attempt: Attempt, options: SlackLiveOptions = {}): LiveReplyCalls {
  /** False once this account's workspace refused the streaming calls. */
  let native = true;
  /** `<channel>:<ts>` of each open stream → the text appended to it so far. */
  const streams = new Map<string, string>();
  const keyOf = (target: DeliveryTarget, ts: string) => `${target.chatId}:${ts}`;

  async function stopStream(target: DeliveryTarget, ts: string): Promise<void> {
    if (!streams.delete(keyOf(target, ts))) return;
    try {
      await attempt('chat.stopStream', () => client().chat.stopStream({ channel: target.chatId, ts }));
    } catch (error) {
      // A stream Slack already closed (timed out, stopped) is not an error; anything else is.
      if (platformError(error) === undefined) throw error;
      options.logger?.().debug({ err: error, ts }, 'slack: chat.stopStream refused; the message keeps its text');
    }
  }

  return {
    render: (message) => renderSlackChunks(outboundText(message)).filter((part) => part.trim() !== ''),

    async post(target, part, { replyTo, threadId }) {
      const threadTs = threadId ?? target.threadId ?? (target.chatType === 'direct' ? undefined : tsOfMessageId(replyTo ?? target.replyToId));
      if (threadTs && native) {
        const teamId = options.teamId?.();
        const recipient = target.peerId && teamId ? { recipient_user_id: target.peerId, recipient_team_id: teamId } : {};
        try {
          const started = await attempt('chat.startStream', () => client().chat.startStream({ channel: target.chatId, thread_ts: threadTs, markdown_text: part, ...recipient }));
          const ts = String(started.ts);
          streams.set(keyOf(target, ts), part);
          return ts;
        } catch (error) {
          if (!NO_NATIVE_STREAMING.has(platformError(error) ?? '')) throw error;
          native = false;
          options.logger?.().info({ error: platformError(error) }, 'slack: this workspace has no native streaming (chat.startStream refused); live replies use chat.postMessage and chat.update');
        }
      }
      const posted = await attempt('chat.postMessage', () => client().chat.postMessage({ channel: target.chatId, text: part, ...(threadTs ? { thread_ts: threadTs } : {}) }));
      return String(posted.ts);
    },

    async edit(target, ts, part) {
      const appended = streams.get(keyOf(target, ts));
      if (appended !== undefined && part.startsWith(appended)) {
        if (part === appended) return;
        try {
          await attempt('chat.appendStream', () => client().chat.appendStream({ channel: target.chatId, ts, markdown_text: part.slice(appended.length) }));
          streams.set(keyOf(target, ts), part);
          return;
        } catch (error) {
          // Slack no longer takes appends to this stream (closed, timed out): the message is set whole instead.
          if (platformError(error) === undefined) throw error;
          options.logger?.().debug({ err: error, ts }, 'slack: chat.appendStream refused; chat.update instead');
        }
      }
      if (appended !== undefined) await stopStream(target, ts);
      await attempt('chat.update', () => client().chat.update({ channel: target.chatId, ts, text: part }));
    },

    async end(target, ts) {
      const appended = streams.get(keyOf(target, ts));
      await stopStream(target, ts);
      // The stream's calls read their text as standard Markdown while the parts are mrkdwn (`*bold*` would show
      // in italics): once closed, the message is set to the same text as mrkdwn, as every other reply is.
      if (appended !== undefined) await attempt('chat.update', () => client().chat.update({ channel: target.chatId, ts, text: appended }));
    },
  };
}
