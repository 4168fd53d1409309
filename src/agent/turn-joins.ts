import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import type { TranscriptMessage } from '../sessions/transcript.ts';
import { sourceIdOf } from './runs.ts';
import type { GroupContextItem } from './turn-input.ts';
import { userContent } from './user-content.ts';

/** The abort reason of a turn stopped by a newer message (queue mode `interrupt`, SPEC §16). */
export const INTERRUPT_REASON = 'interrupted';

/** Whether a turn's signal was aborted by a newer message (queue mode `interrupt`) rather than `/stop` or shutdown. */
export function isInterrupt(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof Error && signal.reason.message === INTERRUPT_REASON;
}

/** The user entry of a message, with its own `sourceId` so a replay never appends it twice. */
export function userEntryOf(message: InboundMessage, correlationId: string, at: string, groupContext?: GroupContextItem[]): TranscriptMessage {
  return {
    type: 'message', id: randomUUID(), role: 'user', content: userContent(message, groupContext), at, correlationId,
    ...(message.chatType !== 'direct' && message.sender.name && !message.internal ? { name: message.sender.name } : {}), sourceId: sourceIdOf(message),
    ...(message.media?.length ? { media: message.media } : {}),
  };
}

/**
 * Queue mode `steer` at a tool-call boundary: the messages that arrived since become user entries (each with its own
 * `sourceId`), so the next model request carries them. Returns how many joined.
 */
export async function steerIn(
  takeSteered: (() => InboundMessage[] | Promise<InboundMessage[]>) | undefined, append: (entries: TranscriptMessage[]) => Promise<void>, correlationId: string, at: string, logger: Logger,
): Promise<number> {
  const steered = (await takeSteered?.()) ?? [];
  if (!steered.length) return 0;
  await append(steered.map((m) => userEntryOf(m, correlationId, at)));
  logger.info({ messages: steered.map(sourceIdOf) }, 'messages joined the running turn at a tool-call boundary (queue mode steer)');
  return steered.length;
}

/**
 * What a turn has said so far (answers that came with tool calls, and the streamed text of the call in flight), kept
 * when a newer message interrupts it: the transcript then holds the partial answer, marked interrupted.
 */
export class PartialAnswer {
  private readonly kept: string[] = [];
  private current = '';
  /** True once the turn's user entry is in the transcript (before that, there is nothing to mark). */
  started = false;

  /** Wraps a delta listener so the call's streamed text is seen too; undefined stays undefined (no streaming forced). */
  watch(onDelta: ((text: string) => void) | undefined): ((text: string) => void) | undefined {
    return onDelta && ((text) => {
      this.current += text;
      onDelta(text);
    });
  }

  /** An answer that came with tool calls (it is in the transcript already, with its calls). */
  settle(content: string): void {
    if (content.trim()) this.kept.push(content.trim());
    this.current = '';
  }

  /** The assistant entry that closes an interrupted turn. */
  entry(correlationId: string, at: string): TranscriptMessage {
    const text = [...this.kept, this.current.trim()].filter(Boolean).join('\n\n');
    return { type: 'message', id: randomUUID(), role: 'assistant', content: text ? `${text}\n\n[interrupted]` : '[interrupted]', at, correlationId, interrupted: true };
  }
}
