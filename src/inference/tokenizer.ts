import fs from 'node:fs/promises'
import path from 'node:path'
import { Tokenizer } from '@huggingface/tokenizers'
import { Template } from '@huggingface/jinja'

/** A chat message as the template sees it: content already text (parts joined), tool-call arguments parsed. */
export interface TemplateMessage {
  role: string
  content: string | null
  name?: string
  tool_calls?: { id?: string; type: 'function'; function: { name: string; arguments: unknown } }[]
  tool_call_id?: string
  [k: string]: unknown
}

export interface RenderOptions {
  addGenerationPrompt: boolean
  continueFinalMessage: boolean
  tools?: unknown[] | null
  documents?: unknown[] | null
  /** A template given with the request, instead of the model's. */
  template?: string | null
  kwargs?: Record<string, unknown> | null
}

/** Raised for what the client got wrong in a template or its rendering (a 400). */
export class TemplateError extends Error {}

export const NO_TEMPLATE =
  'As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one.'

type TokenizerConfig = Record<string, unknown> & {
  chat_template?: string | { name: string; template: string }[] | null
  eos_token?: unknown
  bos_token?: unknown
}

/** The tokenizer of a model directory with its chat template and end-of-sequence ids. */
export class ModelTokenizer {
  private readonly templates = new Map<string, Template>()
  /** Ids of the tokens that end a generation (the tokenizer's eos and generation_config's eos_token_id). */
  readonly eosIds: ReadonlySet<number>
  /** Every added token (special or not): the places `spaces_between_special_tokens` puts spaces. */
  readonly addedIds: ReadonlySet<number>
  readonly vocabSize: number
  private readonly pieces: (string | undefined)[] = []

  private constructor(
    private readonly tok: Tokenizer,
    private readonly config: TokenizerConfig,
    readonly chatTemplate: string | null,
    eos: number[],
    /** A `tool_use` template of a model that names its templates: used when the request has tools. */
    private readonly toolTemplate: string | null,
    vocabSize: number,
  ) {
    this.vocabSize = vocabSize
    this.eosIds = new Set(eos)
    this.addedIds = new Set(tok.get_added_tokens_decoder().keys())
  }

  static async load(dir: string, vocabSize: number, generationEos: number[]): Promise<ModelTokenizer> {
    const json = JSON.parse(await fs.readFile(path.join(dir, 'tokenizer.json'), 'utf8'))
    let config: TokenizerConfig = {}
    try {
      config = JSON.parse(await fs.readFile(path.join(dir, 'tokenizer_config.json'), 'utf8'))
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e
    }
    const tok = new Tokenizer(json, config)
    let template: string | null = null
    let toolTemplate: string | null = null
    const t = config.chat_template
    if (typeof t === 'string') template = t
    else if (Array.isArray(t)) {
      template = t.find((x) => x.name === 'default')?.template ?? t[0]?.template ?? null
      toolTemplate = t.find((x) => x.name === 'tool_use')?.template ?? null
    }
    // A separate chat_template.jinja (newer model repositories) wins over nothing.
    if (template === null) template = await fs.readFile(path.join(dir, 'chat_template.jinja'), 'utf8').catch(() => null)
    const eos = new Set(generationEos)
    const eosToken =
      typeof config.eos_token === 'string' ? config.eos_token : (config.eos_token as { content?: string } | undefined)?.content
    if (eosToken) {
      const id = tok.token_to_id(eosToken)
      if (id !== undefined) eos.add(id)
    }
    return new ModelTokenizer(tok, config, template, [...eos], toolTemplate, vocabSize)
  }

  encode(text: string, addSpecialTokens: boolean): number[] {
    return this.tok.encode(text, { add_special_tokens: addSpecialTokens }).ids
  }

  /**
   * Text of the ids. With special tokens kept and `spacesBetween` (vLLM's spaces_between_special_tokens),
   * the runs of text between added tokens and the added tokens themselves are joined with spaces.
   */
  decode(ids: number[], skipSpecialTokens: boolean, spacesBetween = false): string {
    // The tokenizers library throws on an empty list rather than answering ''.
    const plain = (x: number[]) =>
      x.length ? this.tok.decode(x, { skip_special_tokens: skipSpecialTokens, clean_up_tokenization_spaces: false }) : ''
    if (skipSpecialTokens || !spacesBetween || !ids.some((i) => this.addedIds.has(i))) return plain(ids)
    const parts: string[] = []
    let run: number[] = []
    for (const id of ids) {
      if (!this.addedIds.has(id)) {
        run.push(id)
        continue
      }
      if (run.length) parts.push(plain(run))
      run = []
      parts.push(plain([id]))
    }
    if (run.length) parts.push(plain(run))
    return parts.join(' ')
  }

  /** One token's own text (for logprobs and token_strs), cached. */
  piece(id: number): string {
    const cached = this.pieces[id]
    if (cached !== undefined) return cached
    const p = this.tok.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false })
    this.pieces[id] = p
    return p
  }

  /** The token's vocabulary entry (e.g. `Ġhello`), or undefined past the tokenizer's vocabulary. */
  tokenString(id: number): string | undefined {
    return this.tok.id_to_token(id)
  }

  get bosToken(): string | null {
    const b = this.config.bos_token
    return typeof b === 'string' ? b : ((b as { content?: string } | null | undefined)?.content ?? null)
  }

  get eosToken(): string | null {
    const e = this.config.eos_token
    return typeof e === 'string' ? e : ((e as { content?: string } | null | undefined)?.content ?? null)
  }

  /** Renders the conversation with the chat template (HF's apply_chat_template, as vLLM calls it). */
  render(messages: TemplateMessage[], o: RenderOptions): string {
    const source = o.template ?? (o.tools?.length && this.toolTemplate ? this.toolTemplate : this.chatTemplate)
    if (source === null || source === undefined) throw new TemplateError(NO_TEMPLATE)
    let tpl = this.templates.get(source)
    if (!tpl) {
      try {
        tpl = new Template(source)
      } catch (e) {
        throw new TemplateError(`Invalid chat template: ${(e as Error).message}`)
      }
      if (this.templates.size > 16) this.templates.clear()
      this.templates.set(source, tpl)
    }
    let text: string
    try {
      text = tpl.render({
        ...(o.kwargs ?? {}),
        messages,
        tools: o.tools ?? undefined,
        documents: o.documents ?? undefined,
        add_generation_prompt: o.addGenerationPrompt,
        bos_token: this.bosToken ?? '',
        eos_token: this.eosToken ?? '',
      })
    } catch (e) {
      throw new TemplateError(`Chat template rendering failed: ${(e as Error).message}`)
    }
    if (o.continueFinalMessage) {
      // The final message is left open: the rendering is cut right after its content.
      const last = messages[messages.length - 1]?.content ?? ''
      const at = last ? text.lastIndexOf(last) : -1
      if (at >= 0) text = text.slice(0, at + last.length)
    }
    return text
  }
}
