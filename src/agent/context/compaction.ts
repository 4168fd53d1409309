import { imageLines } from '../user-content.ts';
import { SwitchboardError } from '../../core/errors.ts';
import type { ChatMessage } from '../../providers/types.ts';
import type { TranscriptMessage } from '../../sessions/transcript.ts';
import { messageTokensOf } from './context.ts';
import { countTokens } from '../../tokens/tokens.ts';

/** A summary could not be made; the session stays as it was and compaction is tried again later. */
export class CompactionError extends SwitchboardError {
  constructor(message: string, cause?: unknown) {
    super('COMPACTION_FAILED', message, { cause, status: 502 });
  }
}

/** The conversation does not fit the model's window even after compacting; the user is told what to do. */
export class ContextOverflowError extends SwitchboardError {
  /** Compactions made in the attempt. */
  readonly compactions: number;
  constructor(compactions: number, cause?: unknown) {
    const why = compactions > 0
      ? `even after compacting it ${compactions} time${compactions === 1 ? '' : 's'}`
      : 'and it could not be compacted any further';
    super('CONTEXT_OVERFLOW', `This conversation no longer fits in the model's context window, ${why}. Start a new session with /new, or send a shorter message.`, { cause, status: 413 });
    this.compactions = compactions;
  }
}

/** Which messages a compaction summarizes and which it keeps verbatim. */
export interface CompactionPlan {
  summarize: TranscriptMessage[];
  keep: TranscriptMessage[];
  firstKeptId: string;
  keptTokens: number;
}

/**
 * Splits the messages after the last compaction into an older part to summarize and a recent tail of about
 * `keepTokens` kept verbatim. The tail always holds the last message group (the last non-tool message and
 * the tool results after it) and never starts with a tool result, so a tool call is never separated from its
 * result. Undefined when there is nothing older than the tail.
 */
export function planCompaction(kept: readonly TranscriptMessage[], keepTokens: number, model: string): CompactionPlan | undefined {
  if (kept.length < 2) return undefined;
  let minStart = kept.length - 1;
  while (minStart > 0 && (kept[minStart] as TranscriptMessage).role === 'tool') minStart--;
  let cut = kept.length;
  let sum = 0;
  for (let i = kept.length - 1; i >= 0; i--) {
    const tokens = messageTokensOf(kept[i] as TranscriptMessage, model);
    if (i < minStart && sum + tokens > keepTokens) break;
    sum += tokens;
    cut = i;
  }
  while (cut > 0 && (kept[cut] as TranscriptMessage).role === 'tool') {
    cut--;
    sum += messageTokensOf(kept[cut] as TranscriptMessage, model);
  }
  if (cut <= 0) return undefined;
  return { summarize: kept.slice(0, cut), keep: kept.slice(cut), firstKeptId: (kept[cut] as TranscriptMessage).id, keptTokens: sum };
}

/** The sections every summary has: what a continuing agent needs. */
export const SUMMARY_SECTIONS = [
  'Use exactly these Markdown sections, each with short bullet points (write "- none" when a section is empty):',
  '## Decisions\n## Open tasks\n## Constraints and preferences\n## Pending asks\n## Exact identifiers\n## Context',
].join('\n\n');

/** The rules every summary follows. */
export const SUMMARY_RULES = 'Rules: copy every identifier exactly as written, never paraphrased: file paths, URLs, ids, names, numbers, amounts, dates, commands, code symbols, error messages. Under "Pending asks" record what the user asked for that is not done or answered yet. Keep what the user decided or prefers. Drop small talk. Do not invent anything. Answer with the summary only.';

/** Instructions of the staged summary calls (a history too long for one request that shares the turn's prefix). */
export const SUMMARY_SYSTEM_PROMPT = [
  'You compact a chat conversation between a user and an AI assistant into a summary that replaces the older messages in the assistant\'s context. Write it for the assistant itself, so that it can continue the conversation without the original messages.',
  SUMMARY_SECTIONS,
  SUMMARY_RULES,
].join('\n\n');

const MERGE_INSTRUCTIONS = 'These are summaries of consecutive parts of one conversation, oldest first. Merge them into one summary with the same sections. Where they conflict the later part wins; an open task or pending ask that a later part shows as done is no longer open. Keep every exact identifier.';

/** Longest tool result given to the summarizer, in characters (head and tail kept). */
export const SUMMARY_TOOL_RESULT_CHARS = 4000;

/** One message as the summarizer reads it. */
export function renderForSummary(m: TranscriptMessage): string {
  if (m.role === 'tool') return `[tool result ${m.toolCallId ?? ''}]: ${clip(m.content, SUMMARY_TOOL_RESULT_CHARS)}`;
  const lines: string[] = [];
  // A user entry's images reach the summarizer as their lines (SPEC §15: a compaction turns them into lines).
  if (m.role === 'user') lines.push(`[user${m.name ? ` ${m.name}` : ''}]: ${m.content}${imageLines(m.media)}`);
  else if (m.content) lines.push(`[assistant]: ${m.content}`);
  for (const call of m.toolCalls ?? []) lines.push(`[assistant called ${call.name} (${call.id}) with ${call.arguments}]`);
  return lines.join('\n');
}

/** A message group: a non-tool message and the tool results that follow it. */
function groups(messages: readonly TranscriptMessage[]): string[] {
  const out: string[] = [];
  for (const m of messages) {
    const text = renderForSummary(m);
    if (m.role === 'tool' && out.length) out[out.length - 1] += `\n${text}`;
    else out.push(text);
  }
  return out;
}

/** Packs texts into chunks of at most `budget` tokens; a text larger than the budget is clipped to it. */
export function packChunks(texts: readonly string[], budget: number, model: string): string[][] {
  const chunks: string[][] = [];
  let current: string[] = [];
  let used = 0;
  for (const raw of texts) {
    let text = raw;
    let tokens = countTokens(text, model) + 2;
    if (tokens > budget) {
      text = clip(text, Math.max(200, Math.floor((text.length * budget) / tokens * 0.9)));
      tokens = countTokens(text, model) + 2;
    }
    if (current.length && used + tokens > budget) {
      chunks.push(current);
      current = [];
      used = 0;
    }
    current.push(text);
    used += tokens;
  }
  if (current.length) chunks.push(current);
  return chunks;
}

/** Which step of a summary a call is. */
export type SummaryStage = { kind: 'single' } | { kind: 'part'; index: number; count: number } | { kind: 'merge'; level: number };

/** Options of {@link summarizeHistory}. */
export interface SummarizeOptions {
  messages: readonly TranscriptMessage[];
  previousSummary?: string;
  /** Extra instructions from `/compact <instructions>`. */
  instructions?: string;
  model: string;
  /** Most tokens of conversation (or partial summaries) one summary request may carry. */
  chunkTokens: number;
  /** Makes one summary call; returns the model's text. */
  call(messages: ChatMessage[], stage: SummaryStage): Promise<string>;
}

/** What {@link summarizeHistory} made. */
export interface SummaryResult {
  summary: string;
  /** Summary calls made. */
  calls: number;
  /** Parts the history was split into (1 = one call). */
  parts: number;
}

/**
 * Summarizes messages (and the previous summary) into one structured summary. A history too long for one
 * call is split into parts at message-group boundaries, each part summarized, and the partial summaries
 * merged (in several levels when even they do not fit one call).
 */
export async function summarizeHistory(options: SummarizeOptions): Promise<SummaryResult> {
  const { model, chunkTokens } = options;
  const blocks = groups(options.messages);
  const previous = options.previousSummary?.trim();
  const extra = options.instructions?.trim() ? `Additional instructions for this summary: ${options.instructions.trim()}\n\n` : '';
  let calls = 0;
  const call = async (content: string, stage: SummaryStage): Promise<string> => {
    calls++;
    const text = (await options.call([{ role: 'system', content: SUMMARY_SYSTEM_PROMPT }, { role: 'user', content }], stage)).trim();
    if (!text) throw new CompactionError('The model returned an empty summary.');
    return text;
  };
  const carry = previous ? `<earlier-summary>\n${previous}\n</earlier-summary>\n\nCarry everything still relevant from the earlier summary into the new one.\n\n` : '';
  const whole = blocks.join('\n');
  if (countTokens(carry + whole, model) + 16 <= chunkTokens) {
    const summary = await call(`${extra}${carry}Summarize this conversation:\n\n<conversation>\n${whole}\n</conversation>`, { kind: 'single' });
    return { summary, calls, parts: 1 };
  }
  const chunks = packChunks(blocks, chunkTokens, model);
  const partials: string[] = previous ? [previous] : [];
  for (const [i, chunk] of chunks.entries()) {
    const stage: SummaryStage = { kind: 'part', index: i + 1, count: chunks.length };
    partials.push(await call(`${extra}Summarize part ${i + 1} of ${chunks.length} of a long conversation:\n\n<conversation>\n${chunk.join('\n')}\n</conversation>`, stage));
  }
  const summary = await merge(partials, 1, chunkTokens, model, (content, level) => call(`${extra}${content}`, { kind: 'merge', level }));
  return { summary, calls, parts: chunks.length };
}

async function merge(summaries: string[], level: number, budget: number, model: string, call: (content: string, level: number) => Promise<string>): Promise<string> {
  if (summaries.length === 1) return summaries[0] as string;
  if (level > 8) throw new CompactionError('The partial summaries do not converge into one; the history is too long for this model.');
  const render = (list: string[], offset: number) => `${MERGE_INSTRUCTIONS}\n\n${list.map((s, i) => `<summary part="${offset + i + 1}">\n${s}\n</summary>`).join('\n\n')}`;
  const packed = packChunks(summaries, Math.max(256, budget - countTokens(MERGE_INSTRUCTIONS, model) - 16), model);
  if (packed.length === 1) return call(render(packed[0] as string[], 0), level);
  const merged: string[] = [];
  let offset = 0;
  for (const group of packed) {
    merged.push(group.length === 1 ? group[0] as string : await call(render(group, offset), level));
    offset += group.length;
  }
  if (merged.length >= summaries.length) throw new CompactionError('The partial summaries are each too long to merge; the history is too long for this model.');
  return merge(merged, level + 1, budget, model, call);
}

/** Head and tail of a long text with a note in between. */
function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = Math.floor(max * 0.7);
  const tail = Math.floor(max * 0.2);
  return `${text.slice(0, head)}\n[… ${text.length - head - tail} characters omitted …]\n${text.slice(text.length - tail)}`;
}
