/** Reference greedy continuation of stories260K (models/stories260K/README.md, llama2.c float32). */
export const PROMPT_IDS = [1, 403, 407, 261, 378];
export const REFERENCE_IDS = [
  432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282,
  295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432,
  398, 312, 286, 267, 414, 270, 333, 415, 426, 13, 438, 310, 439, 419, 357, 336,
];
export const REFERENCE_TEXT =
  ', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily\'s mom said, "Lily, let\'s go to the park." Lily was sad and didn\'t know what to do. She said, "I';

