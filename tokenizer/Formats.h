//===- Formats.h - the tokenizer files load() reads --------------*- C++ -*-===//
#ifndef FSDP_TOKENIZER_FORMATS_H
#define FSDP_TOKENIZER_FORMATS_H

#include "tokenizer/Bpe.h"

#endif
