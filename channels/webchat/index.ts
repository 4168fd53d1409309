import { randomUUID } from 'node:crypto';
import type { ChannelAdapter, ChannelStatus, InboundSink, SubmitOptions, Submission } from '../../src/core/channel-adapter.ts';
import type { Clock } from '../../src/core/clock.ts';
import { SwitchboardError } from '../../src/core/errors.ts';
import type { Attachment, DeliveryTarget, InboundMessage, OutboundFile, OutboundMessage } from '../../src/core/message.ts';
import { outboundText } from '../../src/core/message.ts';
import { WebchatOutbox, type WebchatFile, type WebchatListener, type WebchatPush } from './outbox.ts';

export type { WebchatFile, WebchatListener, WebchatPush } from './outbox.ts';

/** What the web chat submits besides the text: who it counts against, the correlation id, stored attachments. */
export type WebchatSubmitOptions = SubmitOptions & { correlationId?: string; rateLimitKey?: string; attachments?: Attachment[] };

/** Options of {@link createWebchatChannel}. */
export interface WebchatOptions {
  clock: Clock;
}

/** The web chat is stopped (the gateway is shutting down, or it never started). */
export class WebchatStoppedError extends SwitchboardError {
  constructor() {
    super('CHANNEL_STOPPED', 'The web chat is not running; try again once the gateway is back.', { status: 503 });
  }
}

/**
 * The built-in web chat, without a transport: `src/http/webchat-routes.ts` serves it over HTTP
 * (`POST /webchat/messages`, `GET /webchat/events`).
 */
export interface WebchatChannel extends ChannelAdapter {
  readonly id: 'webchat';
  /**
   * Submits what `user` typed. The turn's own replies come back in its result; replies sent later (a
   * sub-agent's result, a goal's background batches) go to {@link WebchatChannel.subscribe}'s listeners.
   * Throws {@link WebchatStoppedError} when the channel is not running. `rateLimitKey`: whom `limits.perSender`
   * counts the message against (default `webchat:<user>`). `attachments`: files already in the media store
   * (`sha256` set; the HTTP route stores them); `text` may then be empty.
   */
  submit(user: string, text: string, options?: WebchatSubmitOptions): Promise<Submission>;
  /** Hands `user`'s later replies to `listener` until the returned function is called or the channel stops. */
  subscribe(user: string, listener: WebchatListener): () => void;
  /**
   * Cluster mode: a reply whose request went away (the page closed mid-turn) goes to `forward` too, besides this
   * process's open pages, so the user's pages on other replicas get it.
   */
  forwardOrphans(forward: (user: string, push: WebchatPush) => void): void;
}

/** The message of one line `user` typed in the web chat (a direct chat whose peer is the name), with its attachments. */
export function webchatMessage(user: string, text: string, now: number, correlationId?: string, rateLimitKey?: string, attachments: Attachment[] = []): InboundMessage {
  return {
    id: randomUUID(), channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: user, peerId: user,
    sender: { id: user, name: user }, text, attachments, mentionsBot: true, receivedAt: now,
    ...(correlationId ? { correlationId } : {}), ...(rateLimitKey ? { rateLimitKey } : {}),
  };
}

/** A reply's file as the web chat passes it on (the HTTP side links it, storing it first when it has no `sha256`). */
export function webchatFile(file: OutboundFile): WebchatFile {
  return { name: file.name, mime: file.mime, size: file.size, ...(file.sha256 ? { sha256: file.sha256 } : { path: file.path }) };
}

export function isWebchatChannel(adapter: ChannelAdapter): adapter is WebchatChannel {
  return adapter.id === 'webchat' && typeof (adapter as Partial<WebchatChannel>).subscribe === 'function';
}

export function createWebchatChannel(options: WebchatOptions): WebchatChannel {
  let sink: InboundSink | undefined;
  let status: ChannelStatus = 'stopped';
  /** Stopped after running (shutting down): a page that subscribes now is ended at once. */
  let closed = false;
  const outbox = new WebchatOutbox();
  /** Messages whose HTTP request is still waiting for the turn: their replies go back in its answer. */
  const waiting = new Map<string, AbortSignal | undefined>();
  let forwardOrphan: ((user: string, push: WebchatPush) => void) | undefined;

  return {
    id: 'webchat',
    accountId: 'default',
    get status() { return status; },
    async start(s) { sink = s; status = 'running'; closed = false; },
    async stop() {
      sink = undefined;
      status = 'stopped';
      closed = true;
      outbox.closeAll();
    },
    async submit(user, text, submitOptions = {}) {
      if (!sink) throw new WebchatStoppedError();
      const { correlationId, rateLimitKey, attachments, ...rest } = submitOptions;
      const message = webchatMessage(user, text, options.clock.now(), correlationId, rateLimitKey, attachments);
      waiting.set(message.id, rest.signal);
      try {
        const submission = await sink(message, rest);
        void submission.done.finally(() => waiting.delete(message.id));
        return submission;
      } catch (error) {
        waiting.delete(message.id);
        throw error;
      }
    },
    // Before the first start (the server listens a moment before channels start) a page may subscribe already.
    subscribe: (user, listener) => {
      if (!closed) return outbox.subscribe(user, listener);
      listener.close();
      return () => undefined;
    },
    async send(target: DeliveryTarget, message: OutboundMessage) {
      // A reply to a request still waiting goes back in its answer; the rest (replies to internal messages,
      // whose `replyTo` the gateway drops, or to a page that went away) goes to the user's open pages.
      const request = message.replyTo !== undefined && waiting.has(message.replyTo);
      if (request && !waiting.get(message.replyTo!)?.aborted) return;
      const files = message.files?.map(webchatFile);
      const push: WebchatPush = { text: outboundText(message), ...(files?.length ? { files } : {}), kind: message.kind ?? 'reply', at: options.clock.now() };
      outbox.publish(target.chatId, push);
      if (request) forwardOrphan?.(target.chatId, push);
    },
    forwardOrphans(forward) {
      forwardOrphan = forward;
    },
  };
}
