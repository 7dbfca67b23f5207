import type { ModelDefinition } from '@genservice/core';
import { Pacer } from '../util/abort.js';
import { canonicalSettings, seededRandom, type Random } from '../util/random.js';
import { budgetMs, selectSetting, textSetting, type DemoModel } from './types.js';

export const TEXT_LENGTHS = ['short', 'medium', 'long'] as const;
export const TEXT_STYLES = ['story', 'poem', 'product', 'news'] as const;
type TextStyle = (typeof TEXT_STYLES)[number];

const SENTENCES: Record<(typeof TEXT_LENGTHS)[number], number> = { short: 3, medium: 6, long: 12 };

const STOP_WORDS = new Set(
  ('a an the and or but of to in on at by for with from into over under about as is are was were be been it its this that these those ' +
    'i you he she we they me my your our their who whom whose which what where when why how not no yes can could would should will ' +
    'make write create generate please some any very just also then than there here has have had does did done get got')
    .split(
    ' ',
  ),
);

const ADJECTIVES = ['quiet', 'bright', 'curious', 'ancient', 'restless', 'gentle', 'stubborn', 'luminous', 'hidden', 'brave', 'weathered', 'impossible'];
const PLACES = ['by the old harbour', 'under a violet sky', 'at the edge of the forest', 'in a city of glass', 'beyond the northern hills', 'on the last train home', 'in a garden that never sleeps', 'inside a forgotten library'];
const TIMES = ['At dawn', 'Long ago', 'One rainy evening', 'Every winter', 'Just before midnight', 'In the summer of the comet'];
const VERBS = ['wandered', 'dreamed', 'waited', 'listened', 'searched', 'sang', 'remembered', 'argued'];
const FEELINGS = ['wonder', 'longing', 'courage', 'mischief', 'calm', 'hope'];

/** Content words of the prompt, in order, so the text is visibly about what was asked. */
function subjects(prompt: string): string[] {
  // Adverbs and -ing/-ed forms make odd nouns ("the quickly"); dropping them is crude but keeps sentences readable.
  const words = (prompt.toLowerCase().match(/[\p{L}\p{N}'-]+/gu) ?? []).filter(
    (w) => w.length > 2 && !STOP_WORDS.has(w) && !/(ly|ing|ed)$/.test(w),
  );
  return words.length > 0 ? [...new Set(words)] : ['nothing in particular'];
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** The templates of a style, filled in; the caller picks one so that none repeats before all were used. */
function templates(style: TextStyle, topic: string, other: string, random: Random): string[] {
  const adj = random.pick(ADJECTIVES);
  const place = random.pick(PLACES);
  switch (style) {
    case 'story':
      return [
        `${random.pick(TIMES)}, a ${adj} ${topic} ${random.pick(VERBS)} ${place}.`,
        `Nobody expected the ${topic} to notice the ${other}, yet it did, with a kind of ${random.pick(FEELINGS)}.`,
        `The ${other} kept its secret ${place}, and the ${topic} ${random.pick(VERBS)} a little longer.`,
        `"Is this the ${adj} ${other}?" asked the ${topic}, and the wind answered with ${random.pick(FEELINGS)}.`,
        `In the end the ${topic} understood that the ${other} had been ${adj} all along.`,
      ];
    case 'poem':
      return [
        `O ${adj} ${topic}, ${place},`,
        `you carry ${random.pick(FEELINGS)} like the ${other} carries light;`,
        `the ${other} ${random.pick(VERBS)}, and so did I.`,
        `${capitalise(topic)} and ${other}, ${adj} and slow,`,
        `${random.pick(TIMES)}, the ${topic} grew ${adj}.`,
      ];
    case 'product':
      return [
        `Meet the ${adj} ${topic}: designed for people who love the ${other}.`,
        `Built to last, the ${topic} feels at home ${place}.`,
        `Every detail of the ${topic} was chosen to bring a little ${random.pick(FEELINGS)} to your day.`,
        `Pair it with a ${adj} ${other} and you will wonder how you lived without it.`,
        `Rated ${random.int(42, 50) / 10} out of 5 by customers who ${random.pick(VERBS)} with it ${place}.`,
      ];
    case 'news':
      return [
        `Residents reported a ${adj} ${topic} ${place} early on ${random.pick(['Monday', 'Tuesday', 'Thursday', 'Saturday'])}.`,
        `Officials say the ${other} is "${adj}, but under control".`,
        `Experts are divided on whether the ${topic} will affect the ${other} this season.`,
        `According to a survey, ${random.int(12, 88)} percent of people feel ${random.pick(FEELINGS)} about the ${topic}.`,
        `The story is developing; more on the ${topic} and the ${other} as it comes in.`,
      ];
  }
}

const TEMPLATE_COUNT = 5;

/** "a" before a vowel letter becomes "an"; templates cannot know which word lands after them. */
function withArticles(text: string): string {
  return text.replace(/\b([Aa]) (?=[aeiouAEIOU])/g, '$1n ');
}

function shuffled(n: number, random: Random): number[] {
  const items = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = random.int(0, i);
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

const definition: ModelDefinition = {
  modelId: 'demo-text',
  title: 'Demo text (a few sentences about the prompt)',
  resultType: 'text',
  estimatedGenerationTime: 1,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'length', title: 'Length', fieldType: 'select', options: [...TEXT_LENGTHS] },
    { name: 'style', title: 'Style', fieldType: 'select', options: [...TEXT_STYLES] },
  ],
  price: 1,
  timeoutMs: 30_000,
};

/** Writes the text; exported so the README's sample output and the tests share one definition. */
export function writeText(prompt: string, length: (typeof TEXT_LENGTHS)[number], style: TextStyle): string {
  const random = seededRandom(definition.modelId, canonicalSettings({ prompt, length, style }));
  const topics = subjects(prompt);
  const count = SENTENCES[length];
  const lines: string[] = [];
  let order: number[] = [];
  for (let i = 0; i < count; i++) {
    // Walk through the prompt's words in order so each of them turns up before any repeats.
    const topic = topics[i % topics.length];
    const other = topics.length > 1 ? topics[(i + 1) % topics.length] : random.pick(['moon', 'river', 'stranger', 'machine']);
    if (i % TEMPLATE_COUNT === 0) order = shuffled(TEMPLATE_COUNT, random);
    lines.push(templates(style, topic, other, random)[order[i % TEMPLATE_COUNT]]);
  }
  if (style === 'poem') {
    const stanzas: string[] = [];
    for (let i = 0; i < lines.length; i += 4) stanzas.push(lines.slice(i, i + 4).map(capitalise).join('\n'));
    // A poem ends on a full stop, whichever line came last.
    return withArticles(stanzas.join('\n\n').replace(/[,;]$/, '.'));
  }
  const title = style === 'news' ? `${capitalise(topics[0])}: what we know so far\n\n` : '';
  const paragraphs: string[] = [];
  for (let i = 0; i < lines.length; i += 4) paragraphs.push(lines.slice(i, i + 4).map(capitalise).join(' '));
  return withArticles(title + paragraphs.join('\n\n'));
}

export const textModel: DemoModel = {
  definition,
  async run(settings, ctx, runtime) {
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal, (f) => ctx.progress(f));
    const prompt = textSetting(settings, 'prompt');
    const text = writeText(prompt, selectSetting(settings, 'length', TEXT_LENGTHS), selectSetting(settings, 'style', TEXT_STYLES));
    // Streams its words over the run, as a hosted text model streams tokens: each word with the space before it.
    const words = text.match(/\s*\S+/g) ?? [];
    for (const [i, word] of words.entries()) {
      await pacer.reach(i / words.length);
      ctx.output.append(word);
    }
    await pacer.reach(1);
    return { text };
  },
};
