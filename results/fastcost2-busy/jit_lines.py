# jit_lines.py PROG_ID PREFIX: the jited image (PREFIX.bin, for objdump -D -b binary -mi386:x86-64)
# and per line-info record 'jited address, BPF insn, line, file name offset' (PREFIX.lines) of a loaded
# program, from BPF_OBJ_GET_INFO_BY_FD (this machine's bpftool has no libbfd to dump jited code).
import ctypes,struct,sys,json
libc=ctypes.CDLL(None,use_errno=True)
def bpf(cmd,attr):
    b=ctypes.create_string_buffer(attr,128)
    r=libc.syscall(321,cmd,b,128)
    if r<0: raise OSError(ctypes.get_errno(),'bpf')
    return r
pid=int(sys.argv[1])
fd=bpf(13,struct.pack('<III',pid,0,0))
def info(buf=None):
    b=ctypes.create_string_buffer(buf if buf else b'\0'*256,256)
    bpf(15,struct.pack('<IIQ',fd,256,ctypes.addressof(b)))
    return b
i=info()
jlen=struct.unpack_from('<I',i,16)[0]
nli=struct.unpack_from('<I',i,148)[0]; njli=struct.unpack_from('<I',i,168)[0]
lrs=struct.unpack_from('<I',i,172)[0]; jrs=struct.unpack_from('<I',i,176)[0]
jit=ctypes.create_string_buffer(jlen); li=ctypes.create_string_buffer(nli*lrs); jli=ctypes.create_string_buffer(njli*jrs)
req=bytearray(256)
struct.pack_into('<I',req,16,jlen); struct.pack_into('<Q',req,24,ctypes.addressof(jit))
struct.pack_into('<I',req,148,nli); struct.pack_into('<Q',req,152,ctypes.addressof(li))
struct.pack_into('<Q',req,160,ctypes.addressof(jli)); struct.pack_into('<I',req,168,njli)
struct.pack_into('<I',req,172,lrs); struct.pack_into('<I',req,176,jrs)
ks=ctypes.create_string_buffer(8)
struct.pack_into('<I',req,104,1); struct.pack_into('<Q',req,112,ctypes.addressof(ks))
i=info(bytes(req))
print('ksym',struct.unpack_from('<Q',ks,0)[0])
open(sys.argv[2]+'.bin','wb').write(jit.raw)
addrs=[struct.unpack_from('<Q',jli,k*jrs)[0] for k in range(njli)]
recs=[struct.unpack_from('<IIII',li,k*lrs) for k in range(nli)]
base=min(addrs) if addrs else 0
# find program start via kallsyms
with open(sys.argv[2]+'.lines','w') as f:
    for a,(off,fo,lo,lc) in zip(addrs,recs):
        f.write('%d %d %d %d\n'%(a,off,lc>>10,fo))
print(jlen,nli,njli)
