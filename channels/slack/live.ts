import type { webApi } from '@slack/bolt';
import type { LiveReplyCalls } from '../../src/core/channel-adapter.ts';
import { outboundText } from '../../src/core/message.ts';
import { tsOfMessageId } from './normalize.ts';
import { renderSlackChunks } from './render.ts';

/** Runs one Web API call of a delivery with the channel's retries (`delivery.maxAttempts`). */
type Attempt = <T>(what: string, call: () => Promise<T>) => Promise<T>;

/**
 * A live reply on Slack (SPEC §16): `chat.postMessage`, then `chat.update` of that message with the whole
 * text rendered to mrkdwn again; in channels, into the thread of the message answered. A rate-limited call
 * (429, `Retry-After`) is waited out and tried again by the channel's retries, which delays the next update.
 */
export function slackLiveCalls(client: () => webApi.WebClient, attempt: Attempt): LiveReplyCalls {
  return {
    render: (message) => renderSlackChunks(outboundText(message)).filter((part) => part.trim() !== ''),
    async post(target, part, { replyTo, threadId }) {
      const threadTs = threadId ?? target.threadId ?? (target.chatType === 'direct' ? undefined : tsOfMessageId(replyTo ?? target.replyToId));
      const posted = await attempt('chat.postMessage', () => client().chat.postMessage({ channel: target.chatId, text: part, ...(threadTs ? { thread_ts: threadTs } : {}) }));
      return String(posted.ts);
    },
    async edit(target, ts, part) {
      await attempt('chat.update', () => client().chat.update({ channel: target.chatId, ts, text: part }));
    },
  };
}
