import type { ResolvedModel } from '../../providers/model-chains.ts';
import type { ResolvedConfig } from '../../config/resolved.ts';
import type { InboundMessage } from '../../core/message.ts';
import type { SessionEntry } from '../../sessions/entry.ts';
import type { ActiveSession } from '../../sessions/manager.ts';

/** A chat command as typed: `/name[@bot] args`. */
export interface ParsedCommand {
  name: string;
  args: string;
}

/** Reads `/name args` (also `/name@botname args`). Names are lowercased. */
export function parseCommand(text: string): ParsedCommand | undefined {
  const m = /^\/([a-zA-Z][\w-]*)(?:@[\w.-]+)?(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (!m) return undefined;
  return { name: (m[1] as string).toLowerCase(), args: (m[2] ?? '').trim() };
}

/** A configured reset trigger at the start of a message (case-insensitive, alone or followed by a space). */
export function matchResetTrigger(text: string, triggers: readonly string[]): { trigger: string; rest: string } | undefined {
  const trimmed = text.trim();
  const lower = trimmed.toLowerCase();
  for (const trigger of triggers) {
    const t = trigger.toLowerCase();
    if (lower === t) return { trigger, rest: '' };
    if (lower.startsWith(`${t} `) || lower.startsWith(`${t}\n`)) return { trigger, rest: trimmed.slice(t.length).trim() };
    // Telegram-style `/new@botname` (the `@` comes right after the trigger's characters, so other text skips the pattern)
    if (trimmed[t.length] !== '@') continue;
    const at = new RegExp(`^${escapeRegExp(t)}@[\\w.-]+(?:\\s+|$)`, 'i').exec(trimmed);
    if (at) return { trigger, rest: trimmed.slice(at[0].length).trim() };
  }
  return undefined;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** What a command may use. Provided by the runtime. */
export interface CommandServices {
  config: ResolvedConfig;
  now(): number;
  /** Model and provider the session's next turn would use. */
  modelOf(entry: SessionEntry): Pick<ResolvedModel, 'providerId' | 'model' | 'ref' | 'contextWindow' | 'userChosen' | 'fallbacks'>;
  save(entry: SessionEntry): Promise<void>;
  /** Aborts the session's running turn; false when none runs. */
  stopTurn(key: string): boolean;
  /**
   * Whether a turn of the session runs, and how many of its messages wait (not counting the running one); in
   * cluster mode on any replica.
   */
  turnState(key: string): Promise<{ running: boolean; queued: number }>;
  /** The reset policy text of a session, for /status. */
  describeReset(entry: SessionEntry): string;
  /** The session's tool preset, the tools it enables and what their schemas cost per request. */
  toolsOf(entry: SessionEntry): { preset: string; names: string[]; tokens: number };
}

/** Everything a command handler gets. */
export interface CommandContext {
  session: ActiveSession;
  message: InboundMessage;
  args: string;
  services: CommandServices;
  correlationId: string;
  signal: AbortSignal;
}

/** One chat command (SPEC §6). */
export interface ChatCommand {
  name: string;
  description: string;
  /** Usage line shown by /help, e.g. `/timezone <IANA>`. */
  usage?: string;
  /** Answered at once, ahead of the session's queue (`/stop`, `/status`). */
  immediate?: boolean;
  run(context: CommandContext): Promise<string>;
}

/** The commands every channel understands. Later features register theirs. */
export class CommandRegistry {
  private readonly commands = new Map<string, ChatCommand>();

  register(command: ChatCommand): void {
    this.commands.set(command.name, command);
  }

  get(name: string): ChatCommand | undefined {
    return this.commands.get(name);
  }

  list(): ChatCommand[] {
    return [...this.commands.values()];
  }

  /** The command a message is, if it names a registered one. */
  match(text: string): { command: ChatCommand; args: string } | undefined {
    const parsed = parseCommand(text);
    const command = parsed && this.commands.get(parsed.name);
    return command && parsed ? { command, args: parsed.args } : undefined;
  }
}
