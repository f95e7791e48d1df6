/**
 * Public surface of the tokenizer package: tokenizer.json / GGUF loading,
 * chat templates and streaming detokenization. Import from here rather than
 * from the individual modules.
 */
export {
  loadTokenizer,
  loadTokenizerFromSource,
  type LoadTokenizerOptions,
  type Tokenizer,
  type TokenizerFileSource,
} from './tokenizer.ts';
export {
  type ChatMessage,
  type ChatTemplateOptions,
  DEFAULT_CHATML_TEMPLATE,
  normalizeChatTemplates,
  renderChatTemplate,
} from './chat_template.ts';
export { GGUF_TOKEN_TYPE, ggufToTokenizerJson, tokenizerFromGguf } from './gguf_tokenizer.ts';
export { IncrementalDecoder, type IncrementalDecoderOptions } from './incremental.ts';
