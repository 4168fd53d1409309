import type { ChannelAdapter, ChannelStatus, InboundSink, Submission, SubmitOptions } from '../../src/core/channel-adapter.ts';
import { ChannelError } from '../../src/core/errors.ts';
import type { InboundMessage } from '../../src/core/message.ts';

/** The `cli` channel of an in-process `switchboard chat`: the terminal loop submits through it. */
export interface CliChannel extends ChannelAdapter {
  /** Hands one typed line to the gateway (replies stream to `onDelta` and come back with `done`). */
  submit(message: InboundMessage, options?: SubmitOptions): Promise<Submission>;
}

/**
 * `switchboard chat` with no gateway running: the pipeline runs in the chat's own process and this adapter
 * is its channel. Replies are written by the terminal loop as they stream, so `send` has nothing to push.
 * With a gateway running, the chat posts to `POST /cli/messages` instead and needs no adapter.
 */
export function createCliChannel(): CliChannel {
  let status: ChannelStatus = 'stopped';
  let sink: InboundSink | undefined;
  return {
    id: 'cli',
    accountId: 'default',
    get status() { return status; },
    async start(s: InboundSink) { sink = s; status = 'running'; },
    async stop() { sink = undefined; status = 'stopped'; },
    async send() {},
    async submit(message, options) {
      if (!sink) throw new ChannelError('CLI_NOT_RUNNING', 'The terminal chat is not connected to the pipeline yet.');
      return sink(message, options);
    },
  };
}
