import type { Client } from 'discord.js';
import { runWithLogContext, type LogContext } from '../../src/core/log-context.ts';

/** What the guard reports to the adapter. */
export interface PacketGuardHooks {
  /** A dispatch that lacks what discord.js needs was dropped before discord.js saw it. */
  dropped(event: string, reason: string, shardId: number | undefined): void;
  /** discord.js threw while handling a dispatch: its caches may be half updated. */
  failed(event: string, error: unknown, shardId: number | undefined): void;
  /** Context of the work, for errors nobody catches. */
  context: LogContext;
}

type Fields = Record<string, 'string' | 'object' | 'array' | 'string?' | 'object?' | 'array?' | 'object|null?'>;

/**
 * The fields discord.js reads without checking, per dispatch event (the gateway sends them on every
 * event of that kind). Nested paths use dots.
 */
const REQUIRED: Record<string, Fields> = {
  READY: { user: 'object', 'user.id': 'string', session_id: 'string', guilds: 'array' },
  MESSAGE_CREATE: {
    id: 'string', channel_id: 'string', author: 'object', 'author.id': 'string', content: 'string?', guild_id: 'string?',
    mentions: 'array?', mention_roles: 'array?', attachments: 'array?', embeds: 'array?', components: 'array?', stickers: 'array?',
    sticker_items: 'array?', member: 'object?', referenced_message: 'object|null?', message_reference: 'object?', thread: 'object?',
  },
  MESSAGE_UPDATE: { id: 'string', channel_id: 'string', author: 'object?', mentions: 'array?', attachments: 'array?', embeds: 'array?' },
  MESSAGE_DELETE: { id: 'string', channel_id: 'string' },
  MESSAGE_DELETE_BULK: { ids: 'array', channel_id: 'string' },
  MESSAGE_REACTION_ADD: { channel_id: 'string', message_id: 'string', user_id: 'string', emoji: 'object' },
  MESSAGE_REACTION_REMOVE: { channel_id: 'string', message_id: 'string', user_id: 'string', emoji: 'object' },
  MESSAGE_REACTION_REMOVE_ALL: { channel_id: 'string', message_id: 'string' },
  MESSAGE_REACTION_REMOVE_EMOJI: { channel_id: 'string', message_id: 'string', emoji: 'object' },
  GUILD_CREATE: { id: 'string', channels: 'array?', threads: 'array?', members: 'array?', roles: 'array?', emojis: 'array?' },
  GUILD_UPDATE: { id: 'string' },
  GUILD_DELETE: { id: 'string' },
  GUILD_MEMBER_ADD: { guild_id: 'string', user: 'object', 'user.id': 'string' },
  GUILD_MEMBER_UPDATE: { guild_id: 'string', user: 'object', 'user.id': 'string' },
  GUILD_MEMBER_REMOVE: { guild_id: 'string', user: 'object', 'user.id': 'string' },
  GUILD_MEMBERS_CHUNK: { guild_id: 'string', members: 'array' },
  GUILD_ROLE_CREATE: { guild_id: 'string', role: 'object', 'role.id': 'string' },
  GUILD_ROLE_UPDATE: { guild_id: 'string', role: 'object', 'role.id': 'string' },
  GUILD_ROLE_DELETE: { guild_id: 'string', role_id: 'string' },
  CHANNEL_CREATE: { id: 'string' },
  CHANNEL_UPDATE: { id: 'string' },
  CHANNEL_DELETE: { id: 'string' },
  CHANNEL_PINS_UPDATE: { channel_id: 'string' },
  THREAD_CREATE: { id: 'string' },
  THREAD_UPDATE: { id: 'string' },
  THREAD_DELETE: { id: 'string' },
  THREAD_LIST_SYNC: { guild_id: 'string', threads: 'array', members: 'array' },
  THREAD_MEMBER_UPDATE: { id: 'string' },
  THREAD_MEMBERS_UPDATE: { id: 'string', guild_id: 'string' },
  TYPING_START: { channel_id: 'string', user_id: 'string' },
  USER_UPDATE: { id: 'string' },
  PRESENCE_UPDATE: { user: 'object', 'user.id': 'string' },
  VOICE_STATE_UPDATE: { user_id: 'string' },
  INTERACTION_CREATE: { id: 'string' },
};

/** Events whose `d` may be null. */
const NULLABLE = new Set(['RESUMED']);

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function valueAt(d: Record<string, unknown>, path: string): unknown {
  let node: unknown = d;
  for (const part of path.split('.')) node = node && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined;
  return node;
}

/** Why a dispatch cannot be handed to discord.js, or undefined when it can. */
export function dispatchProblem(packet: unknown): string | undefined {
  if (!packet || typeof packet !== 'object') return 'the frame is not an object';
  const { t, d } = packet as { t?: unknown; d?: unknown };
  if (typeof t !== 'string') return 'the event name is missing';
  if (d === null && NULLABLE.has(t)) return undefined;
  if (typeOf(d) !== 'object') return `its data is ${typeOf(d)}, not an object`;
  for (const [path, rule] of Object.entries(REQUIRED[t] ?? {})) {
    const value = valueAt(d as Record<string, unknown>, path);
    const optional = rule.endsWith('?');
    const wanted = rule.replace('?', '');
    if (value === undefined && optional) continue;
    const actual = typeOf(value);
    if (!wanted.split('|').includes(actual)) return `${path} is ${actual}, not ${wanted}`;
  }
  return undefined;
}

/** Gateway opcodes whose data @discordjs/ws itself reads (the rest it reads nothing of, or only `t` and `s`). */
const DISPATCH = 0;
const INVALID_SESSION = 9;
const HELLO = 10;

/**
 * Why a gateway frame cannot be handed to @discordjs/ws, or undefined when it can. It reads READY's
 * data itself (then discord.js reads `guilds`), and HELLO's heartbeat interval, before any guard of
 * dispatches sees them: a null there threw inside its message handler (an unhandled rejection), and a
 * missing interval made it heartbeat every millisecond.
 */
export function frameProblem(frame: unknown): string | undefined {
  if (!frame || typeof frame !== 'object') return undefined;
  const { op, t, d } = frame as { op?: unknown; t?: unknown; d?: unknown };
  if (op === DISPATCH && t === 'READY') return dispatchProblem(frame);
  if (op === HELLO) {
    const interval = d && typeof d === 'object' ? (d as { heartbeat_interval?: unknown }).heartbeat_interval : undefined;
    if (typeof interval !== 'number' || !Number.isFinite(interval) || interval <= 0) return `the heartbeat interval is ${typeOf(interval)} ${String(interval)}, not a positive number`;
  }
  return undefined;
}

type Listener = (payload: { data: { t: string; d: unknown }; shardId: number }) => void;
/** The parts of an @discordjs/ws shard the guard wraps. */
interface ShardInternals {
  id?: number;
  unpackMessage?: (data: unknown, isBinary: boolean) => unknown;
  onMessage?: (data: unknown, isBinary: boolean) => Promise<void>;
}
interface ManagerInternals {
  attachEvents?: () => void;
  handlePacket?: (packet?: { t?: string }, shard?: { id?: number }) => boolean;
  _ws?: {
    on: (event: string, listener: Listener) => unknown;
    strategy?: { spawn?: (ids: number[]) => Promise<void>; shards?: Map<number, ShardInternals> };
  } | null;
}

const guardedShards = new WeakSet<object>();

/** Checks every frame a shard unpacks ({@link frameProblem}) and catches what its message handler throws. */
function guardShard(shard: ShardInternals, hooks: PacketGuardHooks): void {
  const unpack = shard.unpackMessage;
  const onMessage = shard.onMessage;
  if (guardedShards.has(shard) || typeof unpack !== 'function' || typeof onMessage !== 'function') return;
  guardedShards.add(shard);
  shard.unpackMessage = async function guardedUnpack(data, isBinary) {
    const frame = await unpack.call(this, data, isBinary);
    const problem = frameProblem(frame);
    if (problem) {
      const { op, t } = frame as { op?: unknown; t?: unknown };
      hooks.dropped(op === HELLO ? 'HELLO' : String(t), problem, shard.id);
      return null;
    }
    // Not resumable unless it says so: a reconnect with a fresh session is always safe.
    if (frame && typeof frame === 'object' && (frame as { op?: unknown }).op === INVALID_SESSION && typeof (frame as { d?: unknown }).d !== 'boolean') {
      (frame as { d: boolean }).d = false;
    }
    return frame;
  };
  shard.onMessage = function guardedOnMessage(data, isBinary) {
    return runWithLogContext(hooks.context, async () => {
      try {
        await onMessage.call(this, data, isBinary);
      } catch (error) {
        hooks.failed('gateway frame', error, shard.id);
      }
    });
  };
}

/**
 * Puts a guard between the Discord gateway and discord.js's handlers, which assume well-formed data and
 * throw otherwise (from inside an event emitter, where nothing catches it: a crash of the whole process).
 * Each frame is checked as the shard unpacks it ({@link frameProblem}: READY, HELLO; an INVALID_SESSION
 * without a boolean is taken as not resumable) and each dispatch before discord.js handles it
 * ({@link dispatchProblem}); a malformed one is dropped. An exception
 * while discord.js handles one is caught and reported, so the adapter can restart a client whose caches
 * may now be inconsistent. Everything runs in the adapter's log context. Returns false when discord.js
 * has changed where this hooks in (the process-level guard then remains the last line).
 */
export function guardDispatches(client: Client, hooks: PacketGuardHooks): boolean {
  const manager = client.ws as unknown as ManagerInternals;
  const attach = manager.attachEvents;
  const handle = manager.handlePacket;
  if (typeof attach !== 'function' || typeof handle !== 'function') return false;

  // Deferred packets (queued before READY) are handled later from a setImmediate: guard that path too.
  manager.handlePacket = function guardedHandlePacket(packet, shard) {
    return runWithLogContext(hooks.context, () => {
      try {
        return handle.call(this, packet, shard);
      } catch (error) {
        hooks.failed(packet?.t ?? 'unknown', error, shard?.id);
        return true;
      }
    });
  };

  manager.attachEvents = function guardedAttachEvents(this: ManagerInternals) {
    const ws = this._ws;
    if (!ws || typeof ws.on !== 'function') return attach.call(this);
    const strategy = ws.strategy;
    const spawn = strategy?.spawn;
    if (strategy && typeof spawn === 'function') {
      // Shards are created on connect (and again after a reshard): guard each one as it comes.
      strategy.spawn = async function guardedSpawn(shardIds) {
        await spawn.call(this, shardIds);
        for (const shard of strategy.shards?.values() ?? []) guardShard(shard, hooks);
      };
    }
    const on = ws.on;
    const own = Object.prototype.hasOwnProperty.call(ws, 'on');
    ws.on = function guardedOn(event, listener) {
      // discord.js's READY handler reads `guilds`; what still throws there is caught and reported.
      if (event === 'ready') {
        return on.call(this, event, (payload) => runWithLogContext(hooks.context, () => {
          try {
            listener(payload);
          } catch (error) {
            hooks.failed('READY', error, payload?.shardId);
          }
        }));
      }
      if (event !== 'dispatch') return on.call(this, event, listener);
      return on.call(this, event, (payload) => runWithLogContext(hooks.context, () => {
        const problem = dispatchProblem(payload?.data);
        if (problem) return hooks.dropped(String(payload?.data?.t ?? 'unknown'), problem, payload?.shardId);
        try {
          listener(payload);
        } catch (error) {
          hooks.failed(payload.data.t, error, payload.shardId);
        }
      }));
    };
    try {
      attach.call(this);
    } finally {
      if (own) ws.on = on;
      else delete (ws as { on?: unknown }).on;
    }
  };
  return true;
}
