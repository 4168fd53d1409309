import type { OutboundMessage } from '../../src/core/message.ts';

/**
 * A file a reply carries (the `send_file` tool). The HTTP side links it as `/media/<sha256>?name=…`; one
 * without `sha256` is stored from `path` first (`path` never reaches a page).
 */
export interface WebchatFile {
  name: string;
  mime: string;
  size: number;
  sha256?: string;
  path?: string;
}

/** A reply pushed to a web chat user's open pages: one that came after their request was answered. */
export interface WebchatPush {
  /** Markdown, notice first. */
  text: string;
  /** Files the reply carries, after its text. */
  files?: WebchatFile[];
  kind: NonNullable<OutboundMessage['kind']>;
  /** Epoch milliseconds. */
  at: number;
}

/** One open page of a web chat user (an event stream). */
export interface WebchatListener {
  reply(push: WebchatPush): void;
  /** The channel stopped: end the stream. */
  close(): void;
}

/**
 * Replies for web chat users, handed to the pages they have open. Nothing is kept for a user with no page
 * open: every reply is in the session's transcript, which a page shows when it loads.
 */
export class WebchatOutbox {
  private readonly listeners = new Map<string, Set<WebchatListener>>();

  /** Starts handing `user`'s replies to `listener`; returns the function that stops it. */
  subscribe(user: string, listener: WebchatListener): () => void {
    let set = this.listeners.get(user);
    if (!set) this.listeners.set(user, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(user) === set) this.listeners.delete(user);
    };
  }

  /** Hands a reply to every open page of `user`; returns how many there were. */
  publish(user: string, push: WebchatPush): number {
    const set = this.listeners.get(user);
    for (const listener of set ?? []) listener.reply(push);
    return set?.size ?? 0;
  }

  /** Ends every open page's stream. */
  closeAll(): void {
    for (const set of this.listeners.values()) for (const listener of set) listener.close();
    this.listeners.clear();
  }
}
