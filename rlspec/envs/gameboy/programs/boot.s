	.area PROG (ABS)
	.org 0x0000
	ld sp, #0xFFFE
	ld hl, #0x8000
clear_vram:
	xor a
	ld (hl+), a
	ld a, h
	cp #0xA0
	jr nz, clear_vram
	ld hl, #0xC000
clear_wram:
	xor a
	ld (hl+), a
	ld a, h
	cp #0xE0
	jr nz, clear_wram
	ld hl, #0xFE00
clear_oam:
	xor a
	ld (hl+), a
	ld a, l
	cp #0xA0
	jr nz, clear_oam
	ld c, #0x80
clear_hram:
	xor a
	ldh (c), a
	inc c
	ld a, c
	cp #0xFF
	jr nz, clear_hram
	ld a, #0x30		; p1
	ldh (0x00), a
	ld a, #0x00		; sb
	ldh (0x01), a
	ld a, #0x7E		; sc
	ldh (0x02), a
	ld a, #0x00		; tima
	ldh (0x05), a
	ld a, #0x00		; tma
	ldh (0x06), a
	ld a, #0xF8		; tac
	ldh (0x07), a
	ld a, #0x85		; stat
	ldh (0x41), a
	ld a, #0x00		; scy
	ldh (0x42), a
	ld a, #0x00		; scx
	ldh (0x43), a
	ld a, #0x00		; lyc
	ldh (0x45), a
	ld a, #0xFC		; bgp
	ldh (0x47), a
	ld a, #0xFF		; obp0
	ldh (0x48), a
	ld a, #0xFF		; obp1
	ldh (0x49), a
	ld a, #0x00		; wy
	ldh (0x4A), a
	ld a, #0x00		; wx
	ldh (0x4B), a
	ld a, #0x00		; ie
	ldh (0xFF), a
	ld a, #0xE1		; if
	ldh (0x0F), a
	ldh (0x04), a		; DIV: any write resets the divider
	ld a, #0x91
	ldh (0x40), a		; LCD on
	ld bc, #0x01B0
	push bc
	pop af
	ld bc, #0x0013
	ld de, #0x00D8
	ld hl, #0x014D
	jp hand_over
	.org 0x00FE
hand_over:
	ldh (0x50), a		; A = 1: unmap the boot ROM
