import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { ChannelAdapter, ChannelStatus, InboundSink } from '../../src/core/channel-adapter.ts';
import type { Clock } from '../../src/core/clock.ts';
import { outboundText, type InboundMessage } from '../../src/core/message.ts';

/** Options of {@link createCliChannel}. */
export interface CliChannelOptions {
  user: string;
  clock: Clock;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** Called when the input ends (Ctrl-D) or the user types /exit. */
  onEnd?: () => void;
}

/** `switchboard chat`: a terminal chat through the whole pipeline (channel `cli`). */
export function createCliChannel(options: CliChannelOptions): ChannelAdapter {
  let status: ChannelStatus = 'stopped';
  let rl: ReturnType<typeof createInterface> | undefined;
  const write = (text: string) => options.output.write(text);
  return {
    id: 'cli',
    accountId: 'default',
    get status() { return status; },
    async start(sink: InboundSink) {
      status = 'running';
      rl = createInterface({ input: options.input, terminal: false });
      write(`Switchboard chat as "${options.user}". Type /help for commands, /exit to leave.\n> `);
      let chain = Promise.resolve();
      rl.on('line', (line) => {
        const text = line.trim();
        if (!text) { write('> '); return; }
        if (text === '/exit' || text === '/quit') { rl?.close(); return; }
        // One line at a time: the next prompt appears after the answer.
        chain = chain.then(async () => {
          const message: InboundMessage = {
            id: randomUUID(), channel: 'cli', accountId: 'default', chatType: 'direct', chatId: options.user, peerId: options.user,
            sender: { id: options.user, name: options.user }, text, attachments: [], mentionsBot: true, receivedAt: options.clock.now(),
          };
          let streamed = false;
          const submission = await sink(message, { onDelta: (d) => { streamed = true; write(d); } });
          const result = await submission.done;
          if (!streamed) write((result?.replies ?? []).map(outboundText).join('\n\n'));
          write('\n> ');
        }).catch((error: unknown) => { write(`\nerror: ${(error as Error).message}\n> `); });
      });
      rl.on('close', () => { void chain.then(() => options.onEnd?.()); });
    },
    async stop() { status = 'stopped'; rl?.close(); },
    // Replies are written as they stream (or from the turn result), not pushed.
    async send() {},
  };
}
