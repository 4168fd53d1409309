import { randomUUID } from 'node:crypto';
import type { ChannelAdapter, ChannelStatus, InboundSink, Submission } from '../../src/core/channel-adapter.ts';
import type { ChannelId, DeliveryTarget, InboundMessage, OutboundMessage } from '../../src/core/message.ts';

/** An in-process channel for tests: inject messages, read what the gateway sent back. */
export class TestChannel implements ChannelAdapter {
  readonly id: ChannelId;
  readonly accountId: string;
  status: ChannelStatus = 'stopped';
  readonly sent: { target: DeliveryTarget; message: OutboundMessage }[] = [];
  readonly typings: DeliveryTarget[] = [];
  private sink?: InboundSink;
  private waiters: { count: number; resolve: () => void }[] = [];

  constructor(id: ChannelId = 'telegram', accountId = 'default') {
    this.id = id;
    this.accountId = accountId;
  }

  async start(sink: InboundSink): Promise<void> { this.sink = sink; this.status = 'running'; }
  async stop(): Promise<void> { this.sink = undefined; this.status = 'stopped'; }
  async send(target: DeliveryTarget, message: OutboundMessage): Promise<void> {
    this.sent.push({ target, message });
    for (const w of this.waiters.filter((x) => this.sent.length >= x.count)) w.resolve();
    this.waiters = this.waiters.filter((x) => this.sent.length < x.count);
  }
  async typing(target: DeliveryTarget): Promise<void> { this.typings.push(target); }

  /** Submits a direct message from a peer. */
  inject(text: string, over: Partial<InboundMessage> = {}): Promise<Submission> {
    if (!this.sink) throw new Error('channel not started');
    const peer = over.peerId ?? '42';
    return this.sink({
      id: randomUUID(), channel: this.id, accountId: this.accountId, chatType: 'direct', chatId: peer, peerId: peer,
      sender: { id: peer, name: `user${peer}` }, text, attachments: [], mentionsBot: false, receivedAt: Date.now(), ...over,
    });
  }

  /** Resolves once `count` replies in total have been sent (bounded by `timeoutMs`). */
  waitForSent(count: number, timeoutMs = 5000): Promise<void> {
    if (this.sent.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${count} replies; got ${this.sent.length}`)), timeoutMs);
      this.waiters.push({ count, resolve: () => { clearTimeout(timer); resolve(); } });
    });
  }

  texts(): string[] {
    return this.sent.map((s) => (s.message.notice ? `${s.message.notice}\n\n${s.message.text}` : s.message.text));
  }
}
