# convert.mk - a sample Makefile fragment: converts every *.safetensors file
# of a directory to a ternary .bnt file with bitnet-quantize, every *.gguf
# file to .bnt with bitnet-convert (losslessly: metadata and types kept; set
# GGUF_TO_BNT=bitnet-quantize to quantize float GGUF weights instead), and
# verifies each result with bitnet-verify before it takes its final name.
# DST/NAME.gguf is made from SRC/NAME.bnt on request (ternary tensors become
# TQ2_0, base-3 ones TQ1_0).  Installed as $(datadir)/bitnet/convert.mk; see
# bitnet-quantize(1) and bitnet-convert(1).
#
#   make -f /usr/local/share/bitnet/convert.mk SRC=models DST=out -j4
#   make -f .../convert.mk SRC=models QUANTIZE_FLAGS='--scale row --pack base3'
#   make -f .../convert.mk SRC=out DST=gguf gguf/model.gguf
#
# or include it from your own Makefile after setting SRC and DST.
#
# A result is written to TARGET.tmp, verified, then renamed, so a failed or
# interrupted conversion never leaves a TARGET behind (.DELETE_ON_ERROR also
# removes a half-made target); each file is independent, so -j runs them in
# parallel.  File names must not contain spaces (make cannot quote them).

SRC ?= .
DST ?= $(SRC)
BITNET_QUANTIZE ?= bitnet-quantize
BITNET_VERIFY ?= bitnet-verify
BITNET_CONVERT ?= bitnet-convert
GGUF_TO_BNT ?= $(BITNET_CONVERT)
QUANTIZE_FLAGS ?=
CONVERT_FLAGS ?=

BITNET_SOURCES := $(wildcard $(SRC)/*.safetensors)
BITNET_GGUF_SOURCES := $(wildcard $(SRC)/*.gguf)
BITNET_TARGETS := $(patsubst $(SRC)/%.safetensors,$(DST)/%.bnt,$(BITNET_SOURCES)) \
                  $(patsubst $(SRC)/%.gguf,$(DST)/%.bnt,$(BITNET_GGUF_SOURCES))

.DELETE_ON_ERROR:
.PHONY: bitnet-all bitnet-clean

bitnet-all: $(BITNET_TARGETS)

$(DST)/%.bnt: $(SRC)/%.safetensors
	@mkdir -p $(@D)
	@rm -f $@.tmp
	$(BITNET_QUANTIZE) -q $(QUANTIZE_FLAGS) $< -o $@.tmp
	$(BITNET_VERIFY) -q $@.tmp || { rm -f $@.tmp; exit 1; }
	mv -f $@.tmp $@

$(DST)/%.bnt: $(SRC)/%.gguf
	@mkdir -p $(@D)
	@rm -f $@.tmp
	$(GGUF_TO_BNT) -q $(CONVERT_FLAGS) $< -o $@.tmp
	$(BITNET_VERIFY) -q $@.tmp || { rm -f $@.tmp; exit 1; }
	mv -f $@.tmp $@

$(DST)/%.gguf: $(SRC)/%.bnt
	@mkdir -p $(@D)
	@rm -f $@.tmp
	$(BITNET_CONVERT) -q $(CONVERT_FLAGS) --to gguf $< -o $@.tmp
	$(BITNET_VERIFY) -q $@.tmp || { rm -f $@.tmp; exit 1; }
	mv -f $@.tmp $@

bitnet-clean:
	rm -f $(BITNET_TARGETS) $(addsuffix .tmp,$(BITNET_TARGETS))
