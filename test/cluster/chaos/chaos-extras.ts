// The chaos extras: besides the chat messages, the same kills and freezes meet background goal runs (SPEC §11),
// scheduled jobs (§17), Telegram photos fetched through getFile (§15) and a re-keying restart (§12, §13). This file
// makes the load (replica config, LLM script, photos, the goal and re-key chats); extras-report.ts measures it.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import sharp from 'sharp';
import { userText } from '../../fakes/fake-openai.ts';
import type { FakeTelegram } from '../../fakes/fake-telegram.ts';
import type { LlmCall, LlmMessage, LlmResponder } from './recording-llm.ts';
import { CHAT_BASE, driveWebhooks, type AckedUpdate, type TelegramPhoto, type WebhookDriverOptions, type WebhookPlatform } from './webhook-driver.ts';

/** The size of the extras. */
export interface ChaosExtrasLoad {
  /** Telegram chats that set goals one after another (the next once the last one answered), till the chat load is in. */
  goalChats: number;
  /** Goals per chat at least (at most 5 × that, while the chat load is still coming in). */
  goalsPerChat: number;
  /** Tool-calling rounds before a goal's answer; with `maxIterationsPerBatch` 2 a goal takes rounds / 2 + 1 batches. */
  goalToolRounds: number;
  /** Job `tick` runs `every <n>s`; job `cron` on a 6-field cron expression every `cronSeconds` s. */
  jobEverySeconds: number;
  cronSeconds: number;
  /** Every n-th Telegram chat sends photos (with the text as caption) at these message indexes. */
  mediaChatEvery: number;
  mediaIndexes: number[];
  /** Telegram + Slack peer pairs that the restarted replica's identityLinks merge; each peer sends `rekeyMessages` early. */
  rekeyPairs: number;
  rekeyMessages: number;
}

export const defaultExtras = (): ChaosExtrasLoad => ({
  goalChats: 4, goalsPerChat: 3, goalToolRounds: 5, jobEverySeconds: 10, cronSeconds: 15, mediaChatEvery: 7, mediaIndexes: [2, 6], rekeyPairs: 2, rekeyMessages: 3,
});

/** A job of the extras: its id, prompt and interval. */
export interface ExtrasJob { id: string; prompt: string; everyMs: number }

/** A photo one message carries, and what the fake serves for it. */
export interface ChaosPhoto extends TelegramPhoto { sha256: string; path: string }

/** A goal a goal chat set and started (both messages acknowledged). */
export interface GoalStarted { chat: number; goal: number; at: number }

const GOAL_RUN = /^g(\d+) run (\d+)$/;
export const goalAnswer = (chat: number, goal: number): string => `g${chat} goal ${goal} done`;
export const toolCallId = (chat: number, goal: number, round: number): string => `g${chat}k${goal}r${round}`;
export const peerKey = (peer: string): string => `agent:main:direct:${peer.toLowerCase()}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The extras of one run: chat numbers after the main chats (`base` on), so every text stays unique. */
export class ChaosExtras {
  readonly rekeyTelegram: number[];
  readonly rekeySlack: number[];
  readonly goalChats: number[];
  /** The Telegram chat the jobs deliver to (it never writes). */
  readonly jobChat: number;
  readonly jobs: ExtrasJob[];
  readonly photos = new Map<string, ChaosPhoto>();
  readonly goals: GoalStarted[] = [];
  /** Goals whose answer never reached the chat within the driver's bound. */
  goalTimeouts = 0;

  constructor(readonly load: ChaosExtrasLoad, private readonly telegramChats: number, base: number) {
    const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
    this.rekeyTelegram = range(base, load.rekeyPairs);
    this.rekeySlack = range(base + load.rekeyPairs, load.rekeyPairs);
    this.goalChats = range(base + 2 * load.rekeyPairs, load.goalChats);
    this.jobChat = base + 2 * load.rekeyPairs + load.goalChats;
    this.jobs = [
      { id: 'tick', prompt: 'job tick', everyMs: load.jobEverySeconds * 1000 },
      { id: 'cron', prompt: 'job cron', everyMs: load.cronSeconds * 1000 },
    ];
  }

  /** Merged over every replica's config: goals with 2 steps a batch, a memory tool, vision, the jobs. */
  config(): Record<string, unknown> {
    const deliverTo = { channel: 'telegram', peer: String(CHAT_BASE + this.jobChat) };
    return {
      agents: { defaults: { tools: { preset: 'minimal' }, maxIterationsPerBatch: 2, vision: 'on' } },
      backgroundExecution: { enabled: true },
      scheduler: { minIntervalSeconds: Math.min(this.load.jobEverySeconds, this.load.cronSeconds) },
      jobs: [
        { id: 'tick', schedule: `every ${this.load.jobEverySeconds}s`, prompt: 'job tick', deliverTo },
        { id: 'cron', schedule: `*/${this.load.cronSeconds} * * * * *`, timezone: 'UTC', prompt: 'job cron', deliverTo },
      ],
    };
  }

  /** The canonical name of pair i and the two peers it links. */
  pairs(): { canonical: string; telegram: string; slack: string }[] {
    return this.rekeyTelegram.map((t, i) => ({ canonical: `pair${i}`, telegram: String(CHAT_BASE + t), slack: `U${this.rekeySlack[i]!}` }));
  }

  /** The config the first killed replica comes back with: identityLinks merge each pair into one person. */
  restartPatch(): Record<string, unknown> {
    return { session: { identityLinks: Object.fromEntries(this.pairs().map((p) => [p.canonical, [`telegram:${p.telegram}`, `slack:${p.slack}`]])) } };
  }

  /** The LLM script: a job run answers with its correlation id; a goal run calls memory_search `goalToolRounds` times, then answers. */
  readonly respond: LlmResponder = ({ messages, text, correlationId }) => {
    const job = this.jobs.find((j) => j.prompt === text);
    if (job) return { content: `re: ${text} [${correlationId}]`, tag: `job:${job.id}` };
    const at = lastIndex(messages, (m) => m.role === 'user' && GOAL_RUN.test(userText(contentText(m))));
    if (at < 0) return undefined;
    const [, chat, goal] = GOAL_RUN.exec(userText(contentText(messages[at]!)))!.map(Number) as [number, number, number];
    const rounds = messages.slice(at + 1).filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
    if (rounds >= this.load.goalToolRounds) return { content: goalAnswer(chat, goal), tag: `goal:${chat}:${goal}:final` };
    return {
      toolCall: { id: toolCallId(chat, goal, rounds), name: 'memory_search', arguments: JSON.stringify({ query: `g${chat} ${goal} ${rounds}` }) },
      tag: `goal:${chat}:${goal}:${rounds}`,
    };
  };

  /** Makes a small JPEG per photo message (its own colour, so its own sha256) and registers it with the fake. */
  async preparePhotos(telegram: FakeTelegram, messagesPerChat: number): Promise<void> {
    for (let chat = 0; chat < this.telegramChats; chat += this.load.mediaChatEvery) {
      for (const index of this.load.mediaIndexes.filter((i) => i < messagesPerChat)) {
        const [width, height] = [160 + (chat % 50), 120 + index];
        const bytes = await sharp({ create: { width, height, channels: 3, background: { r: (chat * 37) % 256, g: (index * 91) % 256, b: 128 } } }).jpeg().toBuffer();
        const path = `photos/c${chat}-m${index}.jpg`;
        const fileId = telegram.addFile({ bytes, path, contentType: 'image/jpeg' });
        const sha256 = createHash('sha256').update(bytes).digest('hex');
        this.photos.set(`${chat}:${index}`, { fileId, width, height, size: bytes.length, sha256, path });
      }
    }
  }

  readonly photoOf = (chat: number, index: number): TelegramPhoto | undefined => this.photos.get(`${chat}:${index}`);

  /** The re-key pairs' peers write a few messages early (they must be idle when the replica restarts). */
  async driveRekeyChats(telegram: WebhookPlatform, slack: WebhookPlatform, common: Pick<WebhookDriverOptions, 'targets' | 'maxConnections'>): Promise<AckedUpdate[]> {
    const options = { ...common, messagesPerChat: this.load.rekeyMessages, thinkMs: () => 200 + Math.random() * 800 };
    const drives = await Promise.all([
      driveWebhooks({ ...options, platform: telegram, chats: this.rekeyTelegram }),
      driveWebhooks({ ...options, platform: slack, chats: this.rekeySlack }),
    ]);
    return drives.flatMap((d) => d.acked);
  }

  /**
   * Resolves once the re-key pairs' sessions are idle: every message of theirs answered and nothing queued for
   * their keys (a re-key involving a busy session is put off to a later start, SPEC §13); at most `boundMs` (then
   * the restart goes on, and the re-key measures show what happened).
   */
  async readyForRestart(pool: pg.Pool, rekeyAcked: Promise<AckedUpdate[]>, answered: (text: string) => boolean, boundMs = 60_000): Promise<void> {
    const acked = await rekeyAcked;
    const keys = this.pairs().flatMap((p) => [peerKey(p.telegram), peerKey(p.slack)]);
    const deadline = Date.now() + boundMs;
    while (Date.now() < deadline) {
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM sb_lane WHERE session_key = ANY($1) AND next_seq > done_seq', [keys]);
      if (rows[0]?.n === 0 && acked.every((a) => answered(`re: ${a.text}`))) return;
      await sleep(200);
    }
  }

  /**
   * Each goal chat: `/goal g<chat> goal <k>`, then `g<chat> run <k>` (the first batch), then waits until the
   * goal's answer reached the chat (at most `answerBoundMs`) and pauses before the next goal; `goalsPerChat` goals
   * and more until `loadIn` says the chat messages are all acknowledged (so goals run through every fault).
   */
  async driveGoals(telegram: WebhookPlatform, common: Pick<WebhookDriverOptions, 'targets' | 'maxConnections'>, answered: (text: string) => boolean,
    answerBoundMs: number, loadIn: () => boolean): Promise<AckedUpdate[]> {
    const acked: AckedUpdate[] = [];
    await Promise.all(this.goalChats.map(async (chat, i) => {
      await sleep(1000 + i * 1500);
      for (let goal = 1; goal <= this.load.goalsPerChat || (!loadIn() && goal <= 5 * this.load.goalsPerChat); goal++) {
        const drive = await driveWebhooks({
          ...common, platform: telegram, chats: [chat], messagesPerChat: 2, thinkMs: () => 0,
          text: (c, index) => (index === 0 ? `/goal g${c} goal ${goal}` : `g${c} run ${goal}`),
        });
        acked.push(...drive.acked);
        this.goals.push({ chat, goal, at: Date.now() });
        const deadline = Date.now() + answerBoundMs;
        while (!answered(goalAnswer(chat, goal)) && Date.now() < deadline) await sleep(200);
        if (!answered(goalAnswer(chat, goal))) this.goalTimeouts++;
        await sleep(2000 + Math.random() * 6000);
      }
    }));
    return acked;
  }

  /**
   * Waits (at most `boundMs`) until `replica` has an LLM call of a goal run (or a job run) in flight, so that the
   * fault about to come cuts a background batch (or a job's turn) short.
   */
  async inFlight(calls: readonly LlmCall[], replica: string, what: 'goal' | 'job', boundMs: number): Promise<void> {
    const deadline = Date.now() + boundMs;
    while (Date.now() < deadline && !calls.some((c) => c.replica === replica && c.end === 0 && c.tag?.startsWith(`${what}:`))) await sleep(20);
  }

  /** Job runs answer slowly (1.5-2.5 s), so that a fault can meet one. */
  latencyOf(call: LlmCall): number | undefined {
    return call.tag?.startsWith('job:') ? 1500 + Math.random() * 1000 : undefined;
  }
}

function contentText(m: LlmMessage): string {
  return typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.filter((p) => p.type === 'text').map((p) => p.text ?? '').join('\n') : '';
}

function lastIndex<T>(list: T[], test: (x: T) => boolean): number {
  for (let i = list.length - 1; i >= 0; i--) if (test(list[i]!)) return i;
  return -1;
}
