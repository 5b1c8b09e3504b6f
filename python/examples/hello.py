import hmc, numpy as np, concurrent.futures as cf
a, b = hmc.Context(), hmc.Context()  # two contexts in one process; usually two processes
accepted = cf.ThreadPoolExecutor(1).submit(b.accept)  # connect and accept run at the same time
pa, pb = a.connect(b.address()), accepted.result()
y = np.zeros(4); r = pb.recv(y); pa.send(np.arange(4.0)).wait(); r.wait()
print(y, pa.info()["path"])
