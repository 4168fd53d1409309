import { createInterface } from 'node:readline';
import { createCliChannel } from '../../channels/cli/index.ts';
import type { ResolvedConfig } from '../config/resolved.ts';
import { systemClock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import { outboundText } from '../core/message.ts';
import { cliMessage } from '../http/cli-routes.ts';
import { startGateway } from '../main.ts';
import { findCommandTarget, type GatewayClient } from './gateway-client.ts';
import { TerminalMarkdown } from './terminal-markdown.ts';

/** One turn: sends `text`, streams the reply's text to `onDelta`, resolves with the whole reply. */
export type AskFn = (text: string, onDelta: (delta: string) => void) => Promise<{ reply: string; streamed: boolean }>;

/** Options of {@link runChat}. */
export interface ChatOptions {
  config: ResolvedConfig;
  user: string;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** Logger of an in-process pipeline (warnings to stderr). */
  logger: Logger;
  /** Render markdown with ANSI styles (a terminal without NO_COLOR). */
  color: boolean;
}

/** A turn through the running gateway: `POST /cli/messages`, reply streamed as Server-Sent Events. */
export function remoteAsk(client: GatewayClient, user: string): AskFn {
  return async (text, onDelta) => {
    let reply = '';
    let streamed = false;
    await client.stream('/cli/messages', { user, text }, (event) => {
      const data = JSON.parse(event.data) as { text?: string; reply?: string; streamed?: boolean };
      if (event.event === 'delta' && data.text) { streamed = true; onDelta(data.text); }
      if (event.event === 'done') reply = data.reply ?? '';
    });
    return { reply, streamed };
  };
}

/**
 * `switchboard chat`: a terminal chat on channel `cli`. Through the running gateway when there is one, so
 * nothing writes the state folder behind its back; otherwise the pipeline runs in this process (holding the
 * state folder's lock, so a gateway started meanwhile refuses). Replies are rendered for the terminal.
 */
export async function runChat(options: ChatOptions): Promise<void> {
  const target = await findCommandTarget(options.config);
  let ask: AskFn;
  let close: () => Promise<void> = async () => undefined;
  let where: string;
  if (target.kind === 'gateway') {
    ask = remoteAsk(target.client, options.user);
    where = `through the gateway at ${target.client.url} (pid ${target.owner.pid})`;
  } else {
    const channel = createCliChannel();
    const running = await startGateway({ config: options.config, listen: false, adapters: [channel], logger: options.logger, owner: { role: 'cli', command: 'switchboard chat' } });
    await running.supervisor.firstAttempts();
    ask = async (text, onDelta) => {
      let streamed = false;
      const submission = await channel.submit(cliMessage(options.user, text, systemClock.now()), { onDelta: (d) => { streamed = true; onDelta(d); } });
      const result = await submission.done;
      return { reply: (result?.replies ?? []).map(outboundText).join('\n\n'), streamed };
    };
    close = () => running.stop();
    where = 'in this process (no gateway is running)';
  }
  await chatLoop({ ...options, ask, banner: `Switchboard chat as "${options.user}", ${where}. Type /help for commands, /exit to leave.` });
  await close();
}

/** Reads lines, one turn at a time, and writes each reply (rendered when the output is a terminal). */
export async function chatLoop(options: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream; ask: AskFn; banner: string; color: boolean }): Promise<void> {
  const { output } = options;
  const write = (text: string) => { output.write(text); };
  const markdown = new TerminalMarkdown(write, { color: options.color });
  const rl = createInterface({ input: options.input, terminal: false });
  write(`${options.banner}\n> `);
  for await (const line of rl) {
    const text = line.trim();
    if (!text) { write('> '); continue; }
    if (text === '/exit' || text === '/quit') break;
    try {
      let streamedText = '';
      const { reply, streamed } = await options.ask(text, (delta) => { streamedText += delta; markdown.push(delta); });
      if (!streamed) markdown.render(reply);
      else {
        // What the stream did not carry (a notice after the streamed text) is written at its end.
        if (reply.startsWith(streamedText) && reply.length > streamedText.length) markdown.push(reply.slice(streamedText.length));
        markdown.end();
      }
    } catch (error) {
      markdown.end();
      write(`\nerror: ${(error as Error).message}`);
    }
    write('\n> ');
  }
  rl.close();
  write('\n');
}
