import { ChannelError } from '../../src/core/errors.ts';

/** Slack names of common Unicode emoji (Slack's `reactions.add` takes names, not characters). */
const SLACK_NAMES: Readonly<Record<string, string>> = {
  '👀': 'eyes', '👁': 'eye', '👍': '+1', '👎': '-1', '✅': 'white_check_mark', '✔': 'heavy_check_mark', '☑': 'ballot_box_with_check',
  '❤': 'heart', '🔥': 'fire', '🎉': 'tada', '🙏': 'pray', '👌': 'ok_hand', '🤔': 'thinking_face', '👋': 'wave',
  '⏳': 'hourglass_flowing_sand', '⌛': 'hourglass', '💯': '100', '🚀': 'rocket', '⚡': 'zap', '👏': 'clap', '🙌': 'raised_hands',
  '✍': 'writing_hand', '📝': 'memo', '🧠': 'brain', '🤖': 'robot_face', '💬': 'speech_balloon', '💭': 'thought_balloon',
  '🆗': 'ok', '😀': 'grinning', '😊': 'blush', '😂': 'joy', '🤝': 'handshake', '⭐': 'star', '🌟': 'star2', '📌': 'pushpin',
  '🔍': 'mag', '🔎': 'mag_right', '⚙': 'gear', '🛠': 'hammer_and_wrench', '📨': 'incoming_envelope', '📬': 'mailbox_with_mail',
};

/** The configured reaction has no Slack name this channel knows. */
export class SlackReactionNameError extends ChannelError {
  constructor(emoji: string) {
    super('SLACK_REACTION_UNKNOWN', `Slack reactions take emoji names: write ackReaction as ":name:" (e.g. ":eyes:") instead of "${emoji}".`);
  }
}

/**
 * The Slack name of a reaction: `:name:` (or a bare name) as written, a common Unicode emoji by the table above
 * (`👀` → `eyes`; skin tones and variation selectors ignored); anything else throws {@link SlackReactionNameError}.
 */
export function slackReactionName(emoji: string): string {
  const text = emoji.trim();
  const named = /^:?([a-z0-9_+'-]+(?:::skin-tone-[2-6])?):?$/i.exec(text);
  if (named) return named[1]!.toLowerCase();
  const bare = text.replace(/\uFE0F|\p{Emoji_Modifier}/gu, '');
  const name = SLACK_NAMES[bare];
  if (!name) throw new SlackReactionNameError(emoji);
  return name;
}

/** Slack's answer when the bot's reaction is on the message already (a replayed turn): nothing to do. */
export function isAlreadyReacted(error: unknown): boolean {
  return (error as { data?: { error?: unknown } })?.data?.error === 'already_reacted';
}
