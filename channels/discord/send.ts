import { readFile } from 'node:fs/promises';
import { Routes, type Client, type SendableChannels } from 'discord.js';
import { splitImageLines } from '../../src/core/markdown-images.ts';
import { outboundText, type DeliveryTarget, type OutboundFile, type OutboundMessage } from '../../src/core/message.ts';
import { discordNonce } from './nonce.ts';
import { renderDiscord } from './render.ts';
import { sendOverRest } from './shard-leases.ts';

/** Model output never pings anyone but, through the reply reference, the person who asked. */
export const ALLOWED_MENTIONS = { parse: [], repliedUser: true };

/** How a reply reaches Discord: the client, whether over REST only (cluster mode), and the channel's retries. */
export interface DiscordSender {
  /** The REST client (throws when the channel is not running). */
  client(): Client;
  /** Cluster mode: a REST-only client (no gateway, no channel cache). */
  overRest: boolean;
  /** One REST call, tried again while Discord did not take it (`delivery.maxAttempts`). */
  attempt<T>(what: string, call: () => Promise<T>): Promise<T>;
  /** The channel to write to (gateway client). */
  channel(chatId: string): Promise<SendableChannels>;
}

/** One message a reply becomes: a text chunk, an image (an embed showing it), or an uploaded file. */
type Post = { content: string } | { image: string } | { file: OutboundFile };

/**
 * Sends one reply: text rendered and split at 2000 characters; a markdown image alone on its line as a message
 * with an embed showing it, in order with the text (SPEC §15); the message's `files` uploaded after the text,
 * one message each. In channels the first message replies to the one answered. Every message carries its own
 * nonce (enforced), the same when the same reply is sent again, so a retry or replay never posts it twice.
 */
export async function sendDiscordReply(sender: DiscordSender, target: DeliveryTarget, message: OutboundMessage): Promise<void> {
  const parts = splitImageLines(outboundText(message));
  const files = message.files ?? [];
  if (files.length === 0 && !parts.some((part) => part.kind === 'image')) return sendText(sender, target, message);
  const posts: Post[] = [];
  for (const part of parts) {
    if (part.kind === 'image') posts.push({ image: part.url });
    else for (const content of renderDiscord({ ...message, notice: undefined, text: part.text })) posts.push({ content });
  }
  for (const file of files) posts.push({ file });
  const replyTo = message.replyTo ?? target.replyToId;
  const reference = replyTo && target.chatType !== 'direct' ? replyTo : undefined;
  const seed = [outboundText(message), ...files.map((f) => f.name)].join('\u0000');
  for (const [i, post] of posts.entries()) {
    await postOne(sender, target.chatId, post, discordNonce(replyTo, seed, i, message.idempotencyKey), i === 0 ? reference : undefined);
  }
}

/** A reply of text only: as before media, chunk by chunk (nonces from the chunks). */
async function sendText(sender: DiscordSender, target: DeliveryTarget, message: OutboundMessage): Promise<void> {
  const chunks = renderDiscord(message);
  if (chunks.length === 0) return;
  const replyTo = message.replyTo ?? target.replyToId;
  // The same reply sent again (a replay after a crash) carries the same nonces: Discord posts it once.
  const text = chunks.join('\n');
  const nonces = chunks.map((_chunk, i) => discordNonce(replyTo, text, i, message.idempotencyKey));
  if (sender.overRest) {
    return sendOverRest(sender.client(), target.chatId, chunks, target.chatType !== 'direct' ? replyTo : undefined, nonces, (what, call) => sender.attempt(what, call));
  }
  const channel = await sender.attempt('fetchChannel', () => sender.channel(target.chatId));
  // In a DM the reply reference only adds noise; in a busy channel it shows what is answered.
  const reference = replyTo && target.chatType !== 'direct' ? { reply: { messageReference: replyTo, failIfNotExists: false } } : {};
  for (const [i, content] of chunks.entries()) {
    const nonce = nonces[i];
    await sender.attempt<unknown>('createMessage', () => channel.send({ content, allowedMentions: ALLOWED_MENTIONS, ...(nonce ? { nonce, enforceNonce: true } : {}), ...(i === 0 ? reference : {}) }));
  }
}

/** Posts one message of a reply with media, through the gateway client's channel or over REST. */
async function postOne(sender: DiscordSender, chatId: string, post: Post, nonce: string | undefined, reference: string | undefined): Promise<void> {
  const what = 'file' in post ? 'uploadFile' : 'createMessage';
  if (sender.overRest) {
    const data = 'file' in post ? await readFile(post.file.path) : undefined;
    const body = {
      ...('content' in post ? { content: post.content } : {}),
      ...('image' in post ? { embeds: [{ image: { url: post.image } }] } : {}),
      ...('file' in post ? { attachments: [{ id: 0, filename: post.file.name }] } : {}),
      allowed_mentions: { parse: [], replied_user: true },
      ...(nonce ? { nonce, enforce_nonce: true } : {}),
      ...(reference ? { message_reference: { message_id: reference, fail_if_not_exists: false } } : {}),
    };
    const files = 'file' in post && data ? [{ name: post.file.name, data, contentType: post.file.mime }] : undefined;
    await sender.attempt(what, () => sender.client().rest.post(Routes.channelMessages(chatId), { body, ...(files ? { files } : {}) }));
    return;
  }
  const channel = await sender.attempt('fetchChannel', () => sender.channel(chatId));
  await sender.attempt<unknown>(what, () => channel.send({
    ...('content' in post ? { content: post.content } : {}),
    ...('image' in post ? { embeds: [{ image: { url: post.image } }] } : {}),
    ...('file' in post ? { files: [{ attachment: post.file.path, name: post.file.name }] } : {}),
    allowedMentions: ALLOWED_MENTIONS,
    ...(nonce ? { nonce, enforceNonce: true } : {}),
    ...(reference ? { reply: { messageReference: reference, failIfNotExists: false } } : {}),
  }));
}
